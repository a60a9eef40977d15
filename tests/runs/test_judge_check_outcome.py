"""Outcome accounting of judge-check runs: failed variants and verdicts are listed, kept on request, and
retried on resume."""

from __future__ import annotations

from collections.abc import Awaitable
from pathlib import Path

from personagraph import aevaluate, ajudge_check
from personagraph.runs.base import EXIT_INCOMPLETE
from personagraph.runs.eval import EvalSummary
from personagraph.runs.judge_check import JudgeCheckSummary
from tests.runs.switch import assert_kept_then_recovered, assert_sent_only_failed_calls, switch_model
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


async def test_eval_judge_check_failures_are_the_evals_own_and_retried(tmp_path: Path) -> None:
    """eval --judge-check: the check's failed items are in the eval's failures and exit code (the same
    command exits 3 with them), --no-retry-failed keeps them, and the next run of the same eval retries and
    recovers them, sending no successful call twice."""
    rewrites = "plain, neutral language"  # only the judge check's generic-rewrite prompt says this
    model = switch_model("ejc-switch", down=lambda text: rewrites in text)

    def again(retry_failed: bool) -> Awaitable[EvalSummary]:
        return aevaluate("A 70-year-old retired cowboy from Texas", models=["test:agent"],
                         judges=["test:judge"], generator=model.spec, environments=1, questions_per_task=1,
                         judge_check=1, run_dir=tmp_path / "eval", retry_failed=retry_failed)

    def check(summary: EvalSummary) -> dict:
        return summary.model_dump(mode="json")["judge_check"]

    first = await again(True)
    assert first.exit_code == EXIT_INCOMPLETE and first.personas_finished == 1
    assert first.failures and {f.stage for f in first.failures} == {"judge-check:variants"}
    assert len(first.failures) == len(check(first)["failures"])
    assert first.outcome_line().startswith(f"{len(first.failures)} failed items")
    kept = await again(False)
    assert kept.failures == first.failures and kept.retried == 0 and check(kept)["llm_calls"] == 0
    answered = model.up()
    second = await again(True)
    assert second.exit_code == 0 and second.failures == [] and check(second)["failures"] == []
    assert second.retried == second.recovered == len(first.failures)
    assert_sent_only_failed_calls(model, answered, check(second)["llm_calls"], never_made=True)
    third = await again(True)
    assert third.exit_code == 0 and third.retried == 0 and third.llm_calls == check(third)["llm_calls"] == 0


async def test_a_verdict_whose_stored_reply_never_parses_is_permanent_not_retried(tmp_path: Path) -> None:
    judge = switch_model("jc-perm", answer=lambda text: "no JSON, sorry" if "fjord" in text else None)
    items = write_items(tmp_path / "items.jsonl")

    def again() -> Awaitable[JudgeCheckSummary]:
        return ajudge_check(items=str(items), judges=[judge.spec], generator="test:gen", n_resamples=200,
                            run_dir=tmp_path / "check")

    first = await again()
    assert first.failures and all(f.permanent and f.stage == "verdicts" for f in first.failures)
    second = await again()
    assert second.llm_calls == 0 and second.retried == 0 and second.failures == first.failures
    line = second.outcome_line() or ""
    assert "permanent" in line and "run the same command" not in line


async def test_a_variant_the_generator_left_unchanged_is_permanent_not_retried(tmp_path: Path) -> None:
    """The generator's stored reply is the answer itself: a re-run gets the same reply, so it is listed as
    permanent and the outcome line does not ask for a re-run that cannot change it."""
    def echo(text: str) -> str | None:  # the generic rewrite of the fjord answer comes back unchanged
        fjord = "The fjord is calm when I bike home at six."
        return fjord if "plain, neutral language" in text and fjord in text else None

    generator = switch_model("jc-same", answer=echo)
    items = write_items(tmp_path / "items.jsonl")

    def again() -> Awaitable[JudgeCheckSummary]:
        return ajudge_check(items=str(items), judges=["test:judge"], generator=generator.spec,
                            n_resamples=200, variants=["generic"], run_dir=tmp_path / "check")

    first = await again()
    assert [(f.stage, f.reason, f.permanent) for f in first.failures] == [
        ("variants", "the generator returned the answer unchanged", True)]
    assert first.exit_code == EXIT_INCOMPLETE
    second = await again()
    assert second.llm_calls == 0 and second.retried == 0 and second.failures == first.failures
    line = second.outcome_line() or ""
    assert "1 permanent" in line and "run the same command" not in line
