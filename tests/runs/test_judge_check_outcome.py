"""Outcome accounting of judge-check runs: failed variants and verdicts are listed, kept on request, and
retried on resume."""

from __future__ import annotations

from collections.abc import Awaitable
from pathlib import Path

from personagraph import ajudge_check
from personagraph.runs.judge_check import JudgeCheckSummary
from tests.runs.switch import assert_kept_then_recovered, switch_model
from tests.runs.test_judge_check import write_items


async def test_failed_variants_and_verdicts_are_listed_then_retried(tmp_path: Path) -> None:
    model = switch_model("jc-switch", down=lambda text: "fjord" in text)  # the generator and the judge
    items = write_items(tmp_path / "items.jsonl")

    def again(retry_failed: bool) -> Awaitable[JudgeCheckSummary]:
        return ajudge_check(items=str(items), judges=[model.spec], generator=model.spec, n_resamples=200,
                            run_dir=tmp_path / "check", retry_failed=retry_failed)

    first = await again(True)
    assert {f.stage for f in first.failures} == {"variants", "verdicts"}
    assert all(f.model == model.spec and "is down" in f.reason for f in first.failures)
    # the recovered variants are judged now: verdicts never asked before, besides the failed ones
    await assert_kept_then_recovered(first, again, [model], never_made=(model,))
