"""Outcome accounting of behavior-alignment runs: failed labels and responses are listed, kept on request,
retried on resume."""

from __future__ import annotations

from pathlib import Path

from personagraph.metrics.behavior import BehaviorConfig
from personagraph.runs.base import EXIT_INCOMPLETE
from personagraph.runs.behavior import run
from tests.metrics.test_behavior import write_tsv
from tests.runs.switch import assert_sent_only_failed_calls, switch_model


async def test_failed_labels_and_responses_are_listed_then_retried(tmp_path: Path) -> None:
    labeller = switch_model("ba-labeller", down=lambda text: "Shazam" in text)  # one human utterance
    system = switch_model("ba-system", down=lambda text: "comedy" in text)  # the response of d2's turn 2
    config = BehaviorConfig(dialogues=write_tsv(tmp_path / "d.tsv"), labeller=labeller.spec,
                            system=system.spec,
                            n_resamples=100)
    first = await run(config, tmp_path / "run")
    assert first.exit_code == EXIT_INCOMPLETE
    assert [(f.stage, f.item, f.model) for f in first.failures] == [
        ("labels", "d1|4|1", labeller.spec), ("responses", "d2|2", system.spec)]
    assert (first.labeller_failures, first.failed_responses) == (1, 1)  # left out of κ and BA, and listed
    kept = await run(config.model_copy(update={"retry_failed": False}), tmp_path / "run")
    assert kept.llm_calls == 0 and kept.failures == first.failures and kept.retried == 0
    labelled, answered = labeller.up(), system.up()
    second = await run(config, tmp_path / "run")
    assert second.exit_code == 0 and second.failures == [] and second.retried == second.recovered == 2
    assert (second.labeller_failures, second.failed_responses, second.responses) == (0, 0, 3)
    assert_sent_only_failed_calls(system, answered, second.llm_calls)
    # the recovered response is labelled now: a call that was never made, besides the failed one
    assert_sent_only_failed_calls(labeller, labelled, second.llm_calls, never_made=True)
    assert (await run(config, tmp_path / "run")).llm_calls == 0
