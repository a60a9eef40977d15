"""The engine's build runs on every x86-64 level: ggml loads the best CPU variant the machine supports, and
each variant a lesser machine would load answers here too (every variant below this CPU's is a subset of
its instructions). An AMX machine loads the AVX-512 VNNI variant; with ``--no-repack`` it must not crash."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from personagraph.models.engine import Engine, server_path
from personagraph.models.spec import LOCAL_MODELS

LEVELS = ("x64", "haswell", "cascadelake")
"""The CPU variants the build keeps (scripts/build_llama_server.sh), lowest first."""


def _cpu_flags() -> set[str]:
    text = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").is_file() else ""
    flags = (line.split(":", 1)[1] for line in text.splitlines() if line.startswith("flags"))
    return set(next(flags, "").split())


NEEDS = {"x64": set(), "haswell": {"avx2", "fma", "bmi2"}, "cascadelake": {"avx512f", "avx512bw", "avx512_vnni"}}


def test_the_build_holds_one_library_per_kept_variant_and_no_other() -> None:
    folder = server_path().parent
    if not folder.is_dir():
        pytest.skip("llama-server is not built (bash scripts/build_llama_server.sh)")
    built = {p.name.removeprefix("libggml-cpu-").removesuffix(".so") for p in folder.glob("libggml-cpu-*.so")}
    assert built == set(LEVELS)


@pytest.mark.embedded
@pytest.mark.parametrize("variant", [v for v in LEVELS if NEEDS[v] <= _cpu_flags()])
def test_each_variant_this_cpu_can_run_answers(
    variant: str, tmp_path: Path, complete_once: Callable[[Engine], dict[str, Any]]
) -> None:
    """The build folder copied with only ``variant``'s CPU library: ggml loads it, and the server answers."""
    source = server_path().parent
    for path in source.iterdir():
        if not path.name.startswith("libggml-cpu-") or path.name == f"libggml-cpu-{variant}.so":
            shutil.copy2(path, tmp_path / path.name, follow_symlinks=False)
    engine = Engine(LOCAL_MODELS["qwen2.5-coder-0.5b"], slots=1)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PERSONAGRAPH_LLAMA_SERVER", str(tmp_path / "llama-server"))
        try:
            reply = complete_once(engine)
        finally:
            engine.stop()
    assert reply.get("content", "").strip(), reply
    assert not engine.deaths  # a variant that dies at start (SIGILL) is recorded here
