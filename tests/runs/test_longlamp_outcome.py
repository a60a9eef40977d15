"""Outcome accounting of LongLaMP runs: records whose call failed are listed, kept on request, retried."""

from __future__ import annotations

from collections.abc import Awaitable
from pathlib import Path

from personagraph import alonglamp
from personagraph.runs.longlamp import LongLaMPSummary
from tests.metrics.test_longlamp import write_jsonl
from tests.runs.switch import assert_kept_then_recovered, switch_model


async def test_failed_calls_are_listed_then_retried_with_only_their_calls(tmp_path: Path) -> None:
    model = switch_model("ll-switch", down=lambda text: "boots" in text)
    data = write_jsonl(tmp_path)

    def again(retry_failed: bool) -> Awaitable[LongLaMPSummary]:
        return alonglamp(data, model=model.spec, retriever="recency", run_dir=tmp_path / "run",
                         retry_failed=retry_failed)

    first = await again(True)
    assert (first.generated, first.unfinished) == (1, 1)
    assert [(f.stage, f.item, f.model) for f in first.failures] == [("generations", "a", model.spec)]
    second = await assert_kept_then_recovered(first, again, [model])
    assert (second.generated, second.unfinished, second.llm_calls) == (2, 0, 1)
