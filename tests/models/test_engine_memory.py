"""An embedded engine's KV cache becomes resident as prompts fill it, not when the server starts: the
build zeroes a fresh buffer without touching its pages (scripts/llama-patches/), so the slots' full context
costs memory only where it is used."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from personagraph.models.engine import Engine
from personagraph.models.spec import LOCAL_MODELS


def _kib(status: str, field: str) -> int:
    match = re.search(rf"^{field}:\s+(\d+) kB", status, re.MULTILINE)
    assert match, f"/proc status has no {field}"
    return int(match.group(1))


@pytest.mark.embedded
def test_an_engine_holds_the_kv_cache_its_prompts_filled_not_its_whole_context(
    complete_once: Callable[[Engine], dict[str, Any]],
) -> None:
    engine = Engine(LOCAL_MODELS["qwen2.5-coder-0.5b"], slots=4, extra_args=("-lv", "4"))  # logs KV size
    try:
        reply = complete_once(engine)
        assert engine.pid is not None
        status = Path(f"/proc/{engine.pid}/status").read_text()
        this_start = engine.log_path.read_text(errors="replace").rsplit("personagraph: ", 1)[-1]
    finally:
        engine.stop()  # removes the log
    assert reply.get("content", "").strip(), reply
    kv_mib = sum(float(size) for size in re.findall(r"KV buffer size =\s*([\d.]+) MiB", this_start))
    anonymous_mib = _kib(status, "RssAnon") / 1024
    assert kv_mib >= 100, f"expected 4 slots of 4,096 tokens, the server's log says {kv_mib} MiB of KV"
    assert anonymous_mib < kv_mib, (
        f"the server holds {anonymous_mib:.0f} MiB of anonymous memory after a 6-token prompt, more than its "
        f"whole {kv_mib:.0f} MiB KV cache: the KV buffer was written at start (is the build unpatched?)")
