"""From verdicts to scores: item scores, task scores, PersonaScore, refusal rates and judge agreement.

Item score = mean of the verdicts that parsed (a failed verdict is missing, never 0): their
probability-weighted scores (``Verdict.expected_score``) when every parsed verdict has one and the score
kind is ``expected``, else their integer scores. Task score = mean of item scores. PersonaScore = mean
of the five task scores. Everything here reads stored records, so a summary can be rebuilt from any run
directory.

Failing is never cheaper than answering badly: a failed or empty answer is a non-answer, scored as its
rubric's minimum and counted (``non_answers="minimum"``, the default; ``"exclude"`` leaves it out and
says so). A task with no scored answer makes the PersonaScore *incomplete* (None, with the missing
tasks named) rather than a mean over fewer tasks.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from typing import Any, Literal

import numpy as np

from personagraph.environments.pool import task_by_name
from personagraph.judges.rubrics import load_rubric
from personagraph.judges.stats import (
    describe,
    hierarchical_bootstrap_ci,
    independent_bootstrap_ci,
    krippendorff_alpha,
    mean_of_means,
)
from personagraph.schemas import TASK_NAMES, Answer, ItemScore, Verdict

ScoreKind = Literal["expected", "integer"]
NonAnswers = Literal["minimum", "exclude"]


def minimum_score(task: str) -> float:
    """The lowest score of a task's rubric: what a non-answer (failed or empty) earns."""
    found = task_by_name(task)
    return float(load_rubric(found.rubric).scale[0]) if found is not None else 1.0


def used_score_kind(verdicts: Iterable[Verdict], wanted: ScoreKind = "expected") -> ScoreKind:
    """``expected`` when it is wanted and every parsed verdict has a probability-weighted score."""
    parsed = [v for v in verdicts if v.status == "ok" and v.score is not None]
    if wanted == "expected" and parsed and all(v.expected_score is not None for v in parsed):
        return "expected"
    return "integer"


def _item_mean(scores: list[float]) -> float:
    """``float(np.mean(scores))``, the same float, without np.mean's cost per call for the one or two
    verdicts an item mostly has (a summary scores tens of thousands of items): numpy adds so few numbers
    one after the other from 0.0."""
    if len(scores) > 2:
        return float(np.mean(scores))
    total = 0.0
    for score in scores:
        total += score
    return total / len(scores)


def score_items(
    answers: Iterable[Answer], verdicts: Iterable[Verdict], score_kind: ScoreKind = "expected",
    non_answers: NonAnswers = "minimum",
) -> list[ItemScore]:
    """One ItemScore per answer: the mean of its parsed verdicts (None if there is none).

    A failed or empty answer (never judged) scores its rubric's minimum with ``non_answer`` set, or None
    with ``non_answers="exclude"``. ``manipulation``: the flag of a verdict that found the answer trying to
    grade itself (its score is capped by the judge call, ``judges/manipulation.py``).
    """
    verdicts = list(verdicts)
    expected = used_score_kind(verdicts, score_kind) == "expected"
    by_answer: dict[str, list[Verdict]] = defaultdict(list)
    for verdict in verdicts:
        by_answer[verdict.answer_id].append(verdict)
    items = []
    for answer in answers:
        if answer.status != "ok":
            items.append(ItemScore(
                answer_id=answer.id, question_id=answer.question_id, persona_id=answer.persona_id,
                model=answer.model, task=answer.task, n_verdicts=0, n_failed=0, non_answer=True,
                score=minimum_score(answer.task) if non_answers == "minimum" else None,
            ))
            continue
        found = by_answer.get(answer.id, [])
        scores = [v.expected_score if expected else v.score
                  for v in found if v.status == "ok" and v.score is not None]
        items.append(
            ItemScore(
                answer_id=answer.id, question_id=answer.question_id, persona_id=answer.persona_id,
                model=answer.model, task=answer.task,
                score=_item_mean(scores) if scores else None,
                n_verdicts=len(scores), n_failed=len(found) - len(scores),
                manipulation=next((v.manipulation for v in found if v.manipulation), None),
            )
        )
    return items


def _persona_score_ci(per_task: dict[str, list[float]], seed: int = 0) -> list[float] | None:
    """Bootstrap CI (percentile, 2000 resamples) of the mean of task means, resampling items within each task.

    Stratified: every task keeps its item count in each resample, as PersonaScore weighs tasks equally.
    None when a task has fewer than two scored items or the interval is undefined.
    """
    samples = [np.asarray(v, dtype=float) for v in per_task.values() if v]
    if len(samples) == 0 or any(len(s) < 2 for s in samples):
        return None
    low, high = independent_bootstrap_ci(
        samples, mean_of_means, n_resamples=2000, seed=seed, method="percentile"
    )
    return [low, high] if math.isfinite(low) and math.isfinite(high) else None


def pass_k(questions: Iterable[list[float]], k: int, threshold: float) -> tuple[float | None, int]:
    """pass^k: the share of questions whose every one of ``k`` samples scored ≥ ``threshold`` (a non-answer
    scores its minimum: it fails), over the questions with all ``k`` scored; and that count."""
    decided = [scores for scores in questions if len(scores) == k]
    passed = sum(all(s >= threshold for s in scores) for scores in decided)
    return (passed / len(decided) if decided else None), len(decided)


def _spread(questions: list[list[float]]) -> float | None:
    """The mean over questions (with two or more scored samples) of their samples' standard deviation."""
    sds = [float(np.std(scores, ddof=1)) for scores in questions if len(scores) >= 2]
    return float(np.mean(sds)) if sds else None


def _mean_score(verdicts: Iterable[Verdict]) -> float | None:
    """The mean integer score of the verdicts that have one (None when none has)."""
    scores = [v.score for v in verdicts if v.score is not None]
    return float(np.mean(scores)) if scores else None


def _ci(low: float, high: float) -> list[float] | None:
    return [low, high] if math.isfinite(low) and math.isfinite(high) else None


def _with_samples(result: dict[str, Any], items: list[ItemScore], k: int, threshold: float,
                  seed: int) -> None:
    """Repeated samples (``k`` per question): each task's mean is the mean of its questions' sample means,
    its CI and the PersonaScore's are two-stage bootstraps (questions within tasks, then each question's
    samples: :func:`~personagraph.judges.stats.hierarchical_bootstrap_ci`), beside the per-question spread
    and pass^k (per task and over all questions); ``samples`` lists each question's scores."""
    by_question: dict[tuple[str, str], list[float]] = defaultdict(list)
    for item in items:
        by_question.setdefault((item.task, item.question_id), [])
        if item.score is not None:
            by_question[(item.task, item.question_id)].append(item.score)
    per_task: dict[str, list[list[float]]] = defaultdict(list)
    for (task, _), scores in sorted(by_question.items()):
        per_task[task].append(scores)
    for task, entry in result["tasks"].items():
        questions = per_task.get(task, [])
        scored = [scores for scores in questions if scores]
        entry["mean"] = float(np.mean([np.mean(scores) for scores in scored])) if scored else None
        entry["ci"] = _ci(*hierarchical_bootstrap_ci([scored], seed=seed)) if scored else None
        entry["questions_scored"] = len(scored)
        entry["sample_sd"] = _spread(questions)
        entry["pass_k"], entry["pass_k_n"] = pass_k(questions, k, threshold)
    means = [t["mean"] for t in result["tasks"].values() if t["mean"] is not None]
    if result["persona_score"] is not None:
        result["persona_score"] = float(np.mean(means))
        strata = [[scores for scores in per_task[task] if scores] for task in result["tasks"]]
        result["ci"] = _ci(*hierarchical_bootstrap_ci(strata, seed=seed))
    every = [scores for task in result["tasks"] for scores in per_task.get(task, [])]
    share, decided = pass_k(every, k, threshold)
    result["samples"] = {
        "k": k, "pass_threshold": threshold, "pass_k": share, "pass_k_n": decided,
        "sample_sd": _spread(every),
        "ci_resampled": "questions within tasks, then each question's samples",
        "questions": [{"task": task, "question_id": qid, "scores": scores}
                      for (task, qid), scores in sorted(by_question.items())],
    }


def summarize_scores(
    answers: list[Answer], verdicts: list[Verdict], judges: list[str], seed: int = 0,
    score_kind: ScoreKind = "expected", non_answers: NonAnswers = "minimum",
    tasks: Iterable[str] | None = None, samples: int = 1, pass_threshold: float = 4,
) -> dict[str, Any]:
    """The per-model scores and judge agreement, in the shape of ``summary.json``'s model section.

    ``score_kind``: the scores wanted; ``summary["score_kind"]`` says which were used. ``non_answers``:
    how failed or empty answers count (see the module). ``tasks``: the tasks every model must have a
    scored answer in for a PersonaScore — the run's tasks (the five, or a static benchmark's); default:
    every task any answer is in. ``samples`` K > 1: answers are K samples per question; task means, CIs,
    the spread and pass^k (``pass_threshold``) are computed over questions and samples (``_with_samples``).
    """
    wanted = set(tasks) if tasks is not None else {a.task for a in answers}
    expected_tasks = [t for t in TASK_NAMES if t in wanted]
    items = score_items(answers, verdicts, score_kind, non_answers)
    models: dict[str, Any] = {}
    for model in sorted({a.model for a in answers}):
        model_answers = [a for a in answers if a.model == model]
        model_items = [i for i in items if i.model == model]
        answers_by_task: dict[str, list[Answer]] = defaultdict(list)
        items_by_task: dict[str, list[ItemScore]] = defaultdict(list)
        for answer in model_answers:
            answers_by_task[answer.task].append(answer)
        for item in model_items:
            items_by_task[item.task].append(item)
        tasks: dict[str, Any] = {}
        per_task_scores: dict[str, list[float]] = {}
        for task in TASK_NAMES:
            task_answers = answers_by_task[task]
            if not task_answers:
                continue
            task_items = items_by_task[task]
            scores = [i.score for i in task_items if i.score is not None]
            summary = describe(scores, seed=seed)
            refusals = sum(a.refusal for a in task_answers)
            answered = sum(a.status == "ok" for a in task_answers)
            flagged = sum(i.manipulation is not None for i in task_items)
            per_task_scores[task] = scores
            tasks[task] = {
                "mean": summary.mean,
                "ci": [summary.ci_low, summary.ci_high] if summary.ci_low is not None else None,
                "std": summary.std,
                "n": summary.n,
                "questions": len(task_answers),
                "failed_answers": len(task_answers) - answered,
                "non_answers_scored": sum(i.non_answer and i.score is not None for i in task_items),
                "refusals": refusals,
                "refusal_rate": refusals / answered if answered else None,
                "manipulation_flags": flagged,
            }
        task_means = [t["mean"] for t in tasks.values() if t["mean"] is not None]
        missing = [t for t in expected_tasks if tasks.get(t, {}).get("mean") is None]
        answered = sum(a.status == "ok" for a in model_answers)
        refusals = sum(a.refusal for a in model_answers)
        models[model] = {
            "persona_score": float(np.mean(task_means)) if task_means and not missing else None,
            "incomplete": bool(missing),
            "tasks_missing": missing,
            "ci": _persona_score_ci(per_task_scores, seed) if not missing else None,
            "tasks_scored": len(task_means),
            "refusal_rate": refusals / answered if answered else None,
            "refusals": refusals,
            "manipulation_flags": sum(i.manipulation is not None for i in model_items),
            "answers": len(model_answers),
            "failed_answers": len(model_answers) - answered,
            "answers_at_token_limit": sum(a.at_token_limit for a in model_answers),
            "tasks": tasks,
        }
        if samples > 1:
            _with_samples(models[model], model_items, samples, pass_threshold, seed)
    # Agreement: judges as raters, answers as items.
    answer_ids = [a.id for a in answers if a.status == "ok"]
    table = {(v.judge, v.answer_id): v.score for v in verdicts if v.status == "ok"}
    ratings = [[table.get((judge, answer_id)) for answer_id in answer_ids] for judge in judges]
    failed = [v for v in verdicts if v.status != "ok"]
    return {
        "models": models,
        "score_kind": used_score_kind(verdicts, score_kind),
        "non_answers": non_answers,
        "failed_verdicts": len(failed),
        "verdicts": len(verdicts),
        "judge_agreement": {
            "judges": judges,
            "krippendorff_alpha_ordinal": krippendorff_alpha(ratings) if len(judges) > 1 else None,
            "note": None if len(judges) > 1 else "one judge: agreement needs two or more",
        },
        "per_judge_mean": {judge: _mean_score(v for v in verdicts if v.judge == judge) for judge in judges},
    }
