"""From verdicts to scores: probability-weighted scores are used only when every parsed verdict has one."""

from __future__ import annotations

import numpy as np
import pytest

from personagraph.judges.scoring import score_items, summarize_scores
from personagraph.schemas import TASK_NAMES, Answer, Verdict


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


def _model_answers(model: str, toxicity: str) -> tuple[list[Answer], list[Verdict]]:
    """Three questions per task: score 4 everywhere; Toxicity Control answered badly (2) or failed."""
    answers, verdicts = [], []
    for task in TASK_NAMES:
        for q in range(3):
            failed = task == "Toxicity Control" and toxicity == "failed"
            a = Answer(id=f"{model}-{task}-{q}", question_id=f"{task}-{q}", persona_id="p", task=task,
                       model=model, status="failed" if failed else "ok", error="HTTP 500" if failed else None)
            answers.append(a)
            if not failed:
                score = 2 if task == "Toxicity Control" else 4
                verdicts.append(Verdict(id=f"v-{a.id}", answer_id=a.id, judge="j", status="ok", score=score))
    return answers, verdicts


def test_failing_every_toxicity_question_scores_lower_than_answering_badly() -> None:
    fails, fail_verdicts = _model_answers("fails", "failed")
    bad, bad_verdicts = _model_answers("bad", "bad")
    summary = summarize_scores(fails + bad, fail_verdicts + bad_verdicts, ["j"], score_kind="integer")
    scores = {m: summary["models"][m]["persona_score"] for m in ("fails", "bad")}
    assert scores == {"fails": pytest.approx((4 * 4 + 1) / 5), "bad": pytest.approx((4 * 4 + 2) / 5)}
    toxicity = summary["models"]["fails"]["tasks"]["Toxicity Control"]
    assert toxicity["mean"] == 1.0 and toxicity["failed_answers"] == 3 and toxicity["non_answers_scored"] == 3


def test_excluded_non_answers_leave_the_persona_score_incomplete() -> None:
    fails, verdicts = _model_answers("fails", "failed")
    summary = summarize_scores(fails, verdicts, ["j"], score_kind="integer", non_answers="exclude")
    model = summary["models"]["fails"]
    assert summary["non_answers"] == "exclude"
    assert model["persona_score"] is None and model["incomplete"] and model["tasks_missing"] == ["Toxicity Control"]
    assert model["tasks_scored"] == 4 and model["tasks"]["Toxicity Control"]["non_answers_scored"] == 0


def test_a_task_without_answers_makes_the_persona_score_incomplete() -> None:
    answers, verdicts = _model_answers("m", "bad")
    kept = [a for a in answers if a.task != "Expected Action"]
    summary = summarize_scores(kept, verdicts, ["j"], score_kind="integer", tasks=TASK_NAMES)
    assert summary["models"]["m"]["persona_score"] is None
    assert summary["models"]["m"]["tasks_missing"] == ["Expected Action"]
    assert summarize_scores(answers, verdicts, ["j"], tasks=TASK_NAMES)["models"]["m"]["incomplete"] is False


def test_an_unjudged_answer_is_not_a_non_answer() -> None:
    answers, verdicts = _model_answers("m", "bad")
    items = score_items(answers, [v for v in verdicts if "Toxicity" not in v.answer_id], "integer")
    toxicity = [i for i in items if i.task == "Toxicity Control"]
    assert [i.score for i in toxicity] == [None, None, None] and not any(i.non_answer for i in toxicity)


@pytest.mark.parametrize("expected", [[3.6, 2.9, 4.7], [0.1, 0.2], [1e16, 1.0], [-0.0], [-0.0, -0.0], [2, 3]])
def test_an_item_score_is_the_float_numpy_gives_its_verdicts_mean(expected: list[float]) -> None:
    """One or two verdicts are summed without numpy: the item score must not move in the last bit."""
    verdicts = [verdict(0, 3, e, judge=f"j{k}") for k, e in enumerate(expected)]
    (item,) = score_items([answer(0)], verdicts)
    assert repr(item.score) == repr(float(np.mean(expected)))
