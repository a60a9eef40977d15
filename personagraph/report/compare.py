"""``personagraph compare RUN_A RUN_B``: is B really better than A? Per task, on the questions both answered.

Questions are paired by id (a hash of persona, task, position and text), so two runs over the same
benchmark — or two models of one run — compare item by item. For each task: the mean difference B − A with a paired bootstrap
95% CI (:func:`personagraph.judges.stats.bootstrap_ci` of the differences over questions) and the Wilcoxon
signed-rank test (:func:`scipy.stats.wilcoxon`); p-values are also Holm-adjusted over the tasks. Items are
scored with the judges both runs share, so a judge change does not pass for a model change. Runs whose
library versions, prompt/rubric/data files or model weights differ are compared all the same, with a
warning per difference (``provenance``).
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
from pydantic import BaseModel

from personagraph.errors import PersonagraphError
from personagraph.judges.stats import bootstrap_ci
from personagraph.provenance import differences
from personagraph.report.evaldata import items, judges_of, score_field
from personagraph.report.load import Run, load_run
from personagraph.report.tables import Column, Table
from personagraph.schemas import MAX_SEED, TASK_NAMES


class TaskDifference(BaseModel):
    """One task's paired comparison (``task="all tasks"`` pools every shared question).

    Attributes:
        n: questions scored in both runs.
        mean_a, mean_b: mean item score of A and B over those questions.
        diff: mean of B − A; ci_low/ci_high its paired bootstrap 95% CI.
        wins_b, wins_a, ties: questions where B scored higher, lower, equal.
        statistic, p_value: Wilcoxon signed-rank (two-sided; zero differences dropped); None when
            undefined (fewer than one non-zero difference).
        p_holm: Holm-adjusted p over the per-task tests (None for the pooled row).
    """

    task: str
    n: int
    mean_a: float | None
    mean_b: float | None
    diff: float | None
    ci_low: float | None
    ci_high: float | None
    wins_b: int
    wins_a: int
    ties: int
    statistic: float | None
    p_value: float | None
    p_holm: float | None = None

    @property
    def significant(self) -> bool:
        """Holm-adjusted p < 0.05 (raw p for the pooled row) and a CI that excludes 0."""
        p = self.p_holm if self.task != ALL else self.p_value
        return (p is not None and p < 0.05 and self.ci_low is not None and self.ci_high is not None
                and (self.ci_low > 0 or self.ci_high < 0))


ALL = "all tasks"


class Comparison(BaseModel):
    """The comparison of model ``model_b`` of run B against ``model_a`` of run A."""

    run_a: str
    run_b: str
    model_a: str
    model_b: str
    judges: list[str]
    shared: int
    only_a: int
    only_b: int
    tasks: list[TaskDifference]
    overall: TaskDifference
    notes: list[str]
    provenance: list[str] = []  # what the runs' numbers depend on that differs (personagraph.provenance)
    seed: int = 0
    score_kind: str = "integer"  # the item scores' kind, as each run's summary scores them ("expected": weighted)

    def scoring(self) -> str:
        """How an item is scored, in a few words for the table's note."""
        kind = {"expected": "probability-weighted", "integer": "whole-number"}.get(self.score_kind, "mixed-kind")
        return f"item score = mean of the shared judges' {kind} verdicts ({', '.join(self.judges) or '—'})"

    def table(self) -> Table:
        """The per-task differences as an exportable table."""
        rows = [t.model_dump() | {"verdict": verdict(t)} for t in [*self.tasks, self.overall]]
        return Table(
            f"B − A: {self.model_b} ({self.run_b}) vs {self.model_a} ({self.run_a})",
            [Column("task", "task"), Column("n", "shared questions", "int"), Column("mean_a", "A", "score"),
             Column("mean_b", "B", "score"), Column("diff", "B − A", "score"), Column("ci_low", "95% CI low", "score"),
             Column("ci_high", "95% CI high", "score"), Column("wins_b", "B higher", "int"),
             Column("wins_a", "A higher", "int"), Column("ties", "ties", "int"),
             Column("p_value", "Wilcoxon p", "p"), Column("p_holm", "p (Holm)", "p"), Column("verdict", "verdict")],
            rows,
            note=(f"Paired on questions both runs answered; {self.scoring()}. CI: paired bootstrap of the mean "
                  "difference. Verdict "
                  "'B better'/'A better' needs Holm p < 0.05 and a CI excluding 0."),
        )


def verdict(t: TaskDifference) -> str:
    if t.n < 2 or t.diff is None:
        return "too few questions"
    if t.significant:
        return "B better" if t.diff > 0 else "A better"
    return "no clear difference"


def _finite(value: float) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None


def paired_difference(task: str, a: list[float], b: list[float], *, seed: int = 0) -> TaskDifference:
    """Mean difference B − A with its paired bootstrap CI and the Wilcoxon signed-rank test."""
    first, second = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    diffs = second - first
    n = int(diffs.size)
    low = high = None
    if n >= 2:
        # Resampling questions: the mean of the resampled differences, one vectorised bootstrap.
        low, high = bootstrap_ci(diffs, np.mean, seed=seed)
        low, high = _finite(low), _finite(high)
    statistic = p_value = None
    if np.any(diffs != 0):
        from scipy import stats as scipy_stats  # imported where used (~0.6 s at start-up)

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = scipy_stats.wilcoxon(diffs, zero_method="wilcox", alternative="two-sided")
        statistic, p_value = _finite(result.statistic), _finite(result.pvalue)
    elif n >= 1:
        statistic, p_value = 0.0, 1.0
    return TaskDifference(
        task=task, n=n,
        mean_a=float(first.mean()) if n else None, mean_b=float(second.mean()) if n else None,
        diff=float(diffs.mean()) if n else None, ci_low=low, ci_high=high,
        wins_b=int(np.sum(diffs > 0)), wins_a=int(np.sum(diffs < 0)), ties=int(np.sum(diffs == 0)),
        statistic=statistic, p_value=p_value,
    )


def holm(p_values: list[float | None]) -> list[float | None]:
    """Holm–Bonferroni adjusted p-values (None entries are skipped and stay None)."""
    present = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    m = len(present)
    adjusted: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, (p, i) in enumerate(present):
        running = max(running, min(1.0, (m - rank) * p))
        adjusted[i] = running
    return adjusted


def _question_scores(run: Run, model: str, judges: list[str]) -> dict[tuple[str, str], float]:
    """(task, question id) → item score of ``model`` from ``judges``' parsed verdicts, in the run's score kind
    (probability-weighted when its summary is), as its summary scores the item.

    A question's id hashes its persona, task, position and text, so the same question has the same id in
    every run; two runs share exactly the questions both asked. A question answered several times
    (``eval --samples K``) scores the mean of its samples' item scores.
    """
    found: dict[tuple[str, str], list[float]] = {}
    field = score_field(run)
    for item in items(run):
        if item["model"] != model or item["status"] != "ok":
            continue
        scores = [v[field] for v in item["verdicts"]
                  if v.get("judge") in judges and v.get("status") == "ok" and v.get(field) is not None]
        if scores:
            found.setdefault((str(item["task"]), str(item["question_id"])), []).append(float(np.mean(scores)))
    return {key: float(np.mean(scores)) for key, scores in found.items()}


def _models(run: Run) -> list[str]:
    return list(run.summary.get("models", {}))


def _pick_models(a: Run, b: Run, model_a: str | None, model_b: str | None, same: bool) -> tuple[str, str]:
    models_a, models_b = _models(a), _models(b)
    for run, model, models, flag in ((a, model_a, models_a, "--model-a"), (b, model_b, models_b, "--model-b")):
        if model is not None and model not in models:
            raise PersonagraphError(f"{flag} {model}: not in {run.path} (models: {', '.join(models) or 'none'})")
    if model_a and model_b:
        return model_a, model_b
    if same:
        if len(models_a) == 2 and not (model_a or model_b):
            return models_a[0], models_a[1]
        if model_a or model_b:
            other = [m for m in models_a if m != (model_a or model_b)]
            if len(other) == 1:
                return (model_a, other[0]) if model_a else (other[0], model_b)  # type: ignore[return-value]
        raise PersonagraphError(f"{a.path}: one run with models {', '.join(models_a)}; "
                                "choose the pair with --model-a and --model-b")
    if model_a and len(models_b) == 1:
        return model_a, models_b[0]
    if model_b and len(models_a) == 1:
        return models_a[0], model_b
    if len(models_a) == 1 and len(models_b) == 1:
        return models_a[0], models_b[0]
    shared = [m for m in models_a if m in models_b]
    if len(shared) == 1 and not (model_a or model_b):
        return shared[0], shared[0]
    raise PersonagraphError(
        f"several models: {a.path} has {', '.join(models_a)}, {b.path} has {', '.join(models_b)}; "
        "choose with --model-a and --model-b"
    )


def compare_runs(run_a: str | Run, run_b: str | Run, *, model_a: str | None = None, model_b: str | None = None,
                 seed: int = 0) -> Comparison:
    """Compares model B of run B with model A of run A, per task, on their shared questions.

    Args:
        run_a, run_b: run directories (or loaded runs); the same directory compares two of its models.
        model_a, model_b: which model of each run; chosen automatically when each run has one, or when
            one run with exactly two models is given twice.
        seed: bootstrap seed.

    Raises:
        PersonagraphError: not eval runs, unknown models, no shared question.
    """
    if not 0 <= seed <= MAX_SEED:
        raise PersonagraphError(f"--seed {seed}: a bootstrap seed is a whole number from 0 to {MAX_SEED}")
    a = run_a if isinstance(run_a, Run) else load_run(run_a)
    b = run_b if isinstance(run_b, Run) else load_run(run_b)
    same = a.path.resolve() == b.path.resolve()
    for run in (a, b):
        if not run.is_eval:
            raise PersonagraphError(f"{run.path}: a {run.kind} run without eval scores; compare works on eval runs")
    model_a, model_b = _pick_models(a, b, model_a, model_b, same)
    if same and model_a == model_b:
        raise PersonagraphError(f"--model-a and --model-b are both {model_a}: nothing to compare")

    judges_a, judges_b = judges_of(a), judges_of(b)
    judges = [j for j in judges_a if j in judges_b]
    notes = []
    if not judges:
        judges = sorted(set(judges_a) | set(judges_b))
        notes.append(f"the runs share no judge (A: {', '.join(judges_a)}; B: {', '.join(judges_b)}): "
                     "differences mix model and judge effects")
        scores_a = _question_scores(a, model_a, judges_a)
        scores_b = _question_scores(b, model_b, judges_b)
    else:
        if set(judges_a) != set(judges_b):
            notes.append(f"scored with the shared judges only: {', '.join(judges)}")
        scores_a = _question_scores(a, model_a, judges)
        scores_b = _question_scores(b, model_b, judges)
    kinds = [a.summary.get("score_kind", "integer"), b.summary.get("score_kind", "integer")]
    if kinds[0] != kinds[1]:
        notes.append(f"A is scored with {kinds[0]} verdict scores, B with {kinds[1]}: differences mix the two "
                     "(`eval --score-kind` sets it)")
    shared = [key for key in scores_a if key in scores_b]
    if not shared:
        raise PersonagraphError(
            f"{a.path} and {b.path}: no question scored in both (compare needs the same personas and questions, "
            "e.g. runs over one --benchmark)"
        )
    tasks = []
    for task in TASK_NAMES:
        keys = [k for k in shared if k[0] == task]
        if keys:
            tasks.append(paired_difference(task, [scores_a[k] for k in keys], [scores_b[k] for k in keys], seed=seed))
    for t, p in zip(tasks, holm([t.p_value for t in tasks]), strict=True):
        t.p_holm = p
    overall = paired_difference(ALL, [scores_a[k] for k in shared], [scores_b[k] for k in shared], seed=seed)
    return Comparison(
        run_a=a.name, run_b=b.name, model_a=model_a, model_b=model_b, judges=judges, shared=len(shared),
        only_a=len(scores_a) - len(shared), only_b=len(scores_b) - len(shared), tasks=tasks, overall=overall,
        notes=notes, provenance=[] if same else differences(a.meta, b.meta), seed=seed,
        score_kind=kinds[0] if kinds[0] == kinds[1] else "mixed",
    )


def comparison_json(comparison: Comparison) -> dict[str, Any]:
    data = comparison.model_dump()
    for row in [*data["tasks"], data["overall"]]:
        row["verdict"] = verdict(TaskDifference.model_validate(row))
    return data
