"""From verdicts to scores: probability-weighted scores are used only when every parsed verdict has one."""

from __future__ import annotations

import pytest

from personagraph.judges.scoring import score_items, summarize_scores
from personagraph.schemas import Answer, Verdict


def answer(i: int) -> Answer:
    return Answer(id=f"a{i}", question_id=f"q{i}", persona_id="p", task="Expected Action", model="m",
                  status="ok", text="x")


def verdict(i: int, score: int | None, expected: float | None, judge: str = "j") -> Verdict:
    return Verdict(id=f"v{i}{judge}", answer_id=f"a{i}", judge=judge, status="ok" if score else "failed",
                   score=score, expected_score=expected)


def test_expected_scores_are_used_when_every_parsed_verdict_has_one() -> None:
    answers = [answer(0), answer(1)]
    verdicts = [verdict(0, 4, 3.6), verdict(0, 2, 2.5, "k"), verdict(1, 5, 4.8), verdict(1, None, None, "k")]
    assert [i.score for i in score_items(answers, verdicts)] == pytest.approx([3.05, 4.8])
    assert [i.score for i in score_items(answers, verdicts, "integer")] == [3.0, 5.0]
    summary = summarize_scores(answers, verdicts, ["j", "k"])
    assert summary["score_kind"] == "expected"
    assert summary["models"]["m"]["persona_score"] == pytest.approx((3.05 + 4.8) / 2)
    mixed = verdicts + [verdict(1, 3, None, "l")]  # one parsed verdict without logprobs: integers for all
    assert summarize_scores(answers, mixed, ["j", "k", "l"])["score_kind"] == "integer"
    assert [i.score for i in score_items(answers, mixed)] == [3.0, 4.0]
