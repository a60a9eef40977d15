"""Outcome accounting of behavior-alignment runs: failed labels and responses are listed, kept on request,
retried on resume."""

from __future__ import annotations

from collections.abc import Awaitable
from pathlib import Path

from personagraph import abehavior_alignment
from personagraph.runs.behavior import BehaviorSummary
from tests.metrics.test_behavior import write_tsv
from tests.runs.switch import assert_kept_then_recovered, switch_model


async def test_failed_labels_and_responses_are_listed_then_retried(tmp_path: Path) -> None:
    labeller = switch_model("ba-labeller", down=lambda text: "Shazam" in text)  # one human utterance
    system = switch_model("ba-system", down=lambda text: "comedy" in text)  # the response of d2's turn 2
    dialogues = write_tsv(tmp_path / "d.tsv")

    def again(retry_failed: bool) -> Awaitable[BehaviorSummary]:
        return abehavior_alignment(dialogues, labeller=labeller.spec, system=system.spec, n_resamples=100,
                                   run_dir=tmp_path / "run", retry_failed=retry_failed)

    first = await again(True)
    assert [(f.stage, f.item, f.model) for f in first.failures] == [
        ("labels", "d1|4|1", labeller.spec), ("responses", "d2|2", system.spec)]
    assert (first.labeller_failures, first.failed_responses) == (1, 1)  # left out of κ and BA, and listed
    # the recovered response is labelled now: a call never made before, besides the failed one
    second = await assert_kept_then_recovered(first, again, [labeller, system], never_made=(labeller,))
    assert (second.labeller_failures, second.failed_responses, second.responses) == (0, 0, 3)
