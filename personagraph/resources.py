"""Package data files (prompts, rubrics, task specs, the environment pool), read once and hashed.

Everything a model sees comes from these files; their hashes are recorded in every run so results can
be traced to the exact prompt text.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from importlib import resources
from typing import Any

import yaml

from personagraph.errors import PersonagraphError

_used: set[str] = set()


@lru_cache(maxsize=None)
def read_text(path: str) -> str:
    """Returns the text of a data file inside the package, e.g. ``"prompts/persona.yaml"``."""
    try:
        text = resources.files("personagraph").joinpath(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PersonagraphError(f"package data file not found: personagraph/{path}") from None
    _used.add(path)
    return text


@lru_cache(maxsize=None)
def read_yaml(path: str) -> Any:
    """Parses a YAML data file inside the package (cached: files are read once per process)."""
    try:
        return yaml.safe_load(read_text(path))
    except yaml.YAMLError as exc:
        raise PersonagraphError(f"personagraph/{path}: invalid YAML ({exc.__class__.__name__})") from None


def used_files() -> list[str]:
    """The data files read in this process so far (their hashes go into each run's provenance)."""
    return sorted(_used)


def data_hash(path: str) -> str:
    """Short sha256 of a data file, recorded in results next to what it produced."""
    return hashlib.sha256(read_text(path).encode("utf-8")).hexdigest()[:12]


def list_dir(path: str) -> list[str]:
    """Names of the files in a package data folder, sorted."""
    folder = resources.files("personagraph").joinpath(path)
    return sorted(entry.name for entry in folder.iterdir() if entry.is_file())
