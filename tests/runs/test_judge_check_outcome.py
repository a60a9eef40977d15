"""Outcome accounting of judge-check runs: failed variants and verdicts are listed, kept on request, and
retried on resume."""

from __future__ import annotations

from pathlib import Path

from personagraph.runs.base import EXIT_INCOMPLETE
from personagraph.runs.judge_check import JudgeCheckConfig, run
from tests.runs.switch import assert_sent_only_failed_calls, switch_model
from tests.runs.test_judge_check import write_items


async def test_failed_variants_and_verdicts_are_listed_then_retried(tmp_path: Path) -> None:
    model = switch_model("jc-switch", down=lambda text: "fjord" in text)  # the generator and the judge
    config = JudgeCheckConfig(items=str(write_items(tmp_path / "items.jsonl")), judges=[model.spec],
                              generator=model.spec, n_resamples=200)
    first = await run(config, tmp_path / "check")
    assert first.exit_code == EXIT_INCOMPLETE
    assert {f.stage for f in first.failures} == {"variants", "verdicts"}
    assert all(f.model == model.spec and "is down" in f.reason for f in first.failures)
    kept = await run(config.model_copy(update={"retry_failed": False}), tmp_path / "check")
    assert kept.llm_calls == 0 and kept.failures == first.failures and kept.retried == 0
    before = model.up()
    second = await run(config, tmp_path / "check")
    assert second.exit_code == 0 and second.failures == []
    assert second.retried == second.recovered == len(first.failures)
    # the recovered variants are judged now: verdicts that were never asked, besides the failed ones
    assert_sent_only_failed_calls(model, before, second.llm_calls, never_made=True)
    assert (await run(config, tmp_path / "check")).llm_calls == 0
