"""Outcome accounting of LongLaMP runs: records whose call failed are listed, kept on request, retried."""

from __future__ import annotations

from pathlib import Path

from personagraph.metrics.longlamp import LongLaMPConfig
from personagraph.runs.base import EXIT_INCOMPLETE
from personagraph.runs.longlamp import run
from tests.metrics.test_longlamp import write_jsonl
from tests.runs.switch import assert_sent_only_failed_calls, switch_model


async def test_failed_calls_are_listed_then_retried_with_only_their_calls(tmp_path: Path) -> None:
    model = switch_model("ll-switch", down=lambda text: "boots" in text)
    config = LongLaMPConfig(data=write_jsonl(tmp_path), model=model.spec, retriever="recency", k=1)
    first = await run(config, tmp_path / "run")
    assert first.exit_code == EXIT_INCOMPLETE and (first.generated, first.unfinished) == (1, 1)
    assert [(f.stage, f.item, f.model) for f in first.failures] == [("generations", "a", model.spec)]
    kept = await run(config.model_copy(update={"retry_failed": False}), tmp_path / "run")
    assert kept.llm_calls == 0 and kept.failures == first.failures and kept.retried == 0
    before = model.up()
    second = await run(config, tmp_path / "run")
    assert second.exit_code == 0 and second.failures == [] and second.retried == second.recovered == 1
    assert (second.generated, second.unfinished, second.llm_calls) == (2, 0, 1)
    assert_sent_only_failed_calls(model, before, second.llm_calls)
