"""What a run's numbers depend on besides its config: library versions, data-file hashes, model weights.

Recorded in every run's meta (by the shared run context) under three keys, shown by ``personagraph
view`` and checked by ``personagraph compare``, which warns when two runs differ in any of them:

- ``versions``: personagraph, the installed libraries that shape results (:data:`RESULT_LIBRARIES`) and
  the llama.cpp server's build.
- ``data_files``: sha256 (12 hex digits) of every package data file the run read — prompts, rubrics,
  refusal markers, task specs, the environment pool (:func:`personagraph.resources.used_files`). A run
  resumed after a file changed holds both hashes, ``old+new``.
- ``weights``: the sha256 of each embedded model the config names (``local:<name>``), the hash its
  weights are verified against before use, and of each one the process scored text with
  (``likelihood:<name>``: the ``evidence`` judge's features), recorded as the run ends.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterable
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

from personagraph.likelihood import TEST_LM, scored_models
from personagraph.models import LOCAL_MODELS
from personagraph.models.engine import is_built, server_path
from personagraph.resources import data_hash, used_files
from personagraph.version import __version__

# The libraries whose versions can change a run's numbers (prompts and parsing, graphs, model clients,
# inference, statistics, embeddings, metrics); recorded when installed.
RESULT_LIBRARIES = (
    "langgraph", "langchain-core", "langchain-openai", "openai", "pydantic", "numpy", "scipy", "chromadb",
    "sentence-transformers", "transformers", "torch", "rouge-score", "nltk", "bert-score", "rank-bm25",
)
KEYS = ("versions", "data_files", "weights")
_NOT_RESULTS = ("report/",)  # data files that only shape how results are shown (prices, templates)


def library_versions() -> dict[str, str]:
    """personagraph's version, those of the installed :data:`RESULT_LIBRARIES` and the build of the
    llama.cpp server that runs ``local:`` models (when it is built)."""
    versions = {"personagraph": __version__}
    for name in RESULT_LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    if is_built() and (build := llama_server_build(server_path())):
        versions["llama.cpp"] = build
    return versions


@lru_cache(maxsize=4)
def llama_server_build(binary: Path) -> str | None:
    """``llama-server --version``'s build (e.g. ``6123 (a1b2c3d)``), None when it does not say."""
    try:
        done = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    found = re.search(r"^version: (.+)$", done.stderr + done.stdout, re.M)
    return found.group(1).strip() if found else None


def data_file_hashes(previous: dict[str, str] | None = None) -> dict[str, str]:
    """Hashes of the package data files read so far in this process, merged into ``previous`` (the
    record of an earlier invocation of the same run): a file whose hash changed keeps both."""
    hashes = dict(previous or {})
    for path in used_files():
        if path.startswith(_NOT_RESULTS):
            continue
        now, seen = data_hash(path), hashes.get(path)
        if seen is None or now not in seen.split("+"):
            hashes[path] = now if seen is None else f"{seen}+{now}"
    return dict(sorted(hashes.items()))


def weight_hashes(config: Any) -> dict[str, str]:
    """``local:<name>`` → sha256 of its weights, for every embedded model named anywhere in ``config``
    (JSON data: a run config dumped to JSON)."""
    return {spec: LOCAL_MODELS[spec.removeprefix("local:")].sha256 for spec in sorted(set(_strings(config)))
            if spec.startswith("local:") and spec.removeprefix("local:") in LOCAL_MODELS}


def scoring_weight_hashes() -> dict[str, str]:
    """``likelihood:<name>`` → sha256 of the weights of every embedded model this process scored text with
    (the ``evidence`` judge's likelihood features: a run's scores depend on them); the deterministic test
    scorer has no weights and is recorded as such."""
    return {f"likelihood:{scorer}": "deterministic, no weights" if scorer == TEST_LM
            else LOCAL_MODELS[scorer].sha256 for scorer in scored_models()}


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """One line per provenance entry both runs' meta record with different values (A's, then B's).

    Entries only one run has are left out: a model or a prompt only one run uses is a difference of
    config, which the comparison shows already.
    """
    lines = []
    for key in KEYS:
        left, right = a.get(key), b.get(key)
        if isinstance(left, dict) and isinstance(right, dict):
            lines += [f"{key} {name}: A {left[name]}, B {right[name]}"
                      for name in sorted(set(left) & set(right)) if left[name] != right[name]]
    return lines
