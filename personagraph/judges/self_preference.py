"""Self-preference: does a judge score answers of its own model family higher than other models' answers?

Reads an ``eval`` run directory (records ``answer`` with ``model`` and ``verdict`` with ``judge`` and
``score``). For each judge, an answer is *own* when its model is the judge's spec or of the same family
(:attr:`personagraph.models.ModelSpec.family`; a plug-in agent's name that is not a spec is its own
family). Three comparisons, each a difference of means (own − other) with a 95% bootstrap CI and a
two-sided test:

* ``unpaired``: the judge's scores of own vs other answers (Mann–Whitney U; two-sample bootstrap).
* ``paired``: per question answered by both sides, the judge's mean score of own answers minus its mean
  score of other answers (Wilcoxon signed-rank; bootstrap of the mean difference). Same questions, so
  question difficulty cancels.
* ``controlled``: per answer, the judge's score minus the mean score of the *other-family* judges on the
  same answer, compared between own and other answers (Mann–Whitney U; two-sample bootstrap). This
  removes genuine quality differences between the models as the other judges see them; it needs at
  least one judge of another family.

A positive gap whose CI excludes 0 suggests self-preference. Failed verdicts are counted, never scored.
"""

from __future__ import annotations

import math
import warnings
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel

from personagraph.errors import PersonagraphError
from personagraph.judges.stats import bootstrap_ci, independent_bootstrap_ci, mean_difference
from personagraph.models import parse_spec
from personagraph.schemas import Answer, Verdict
from personagraph.store import RunStore


class Gap(BaseModel):
    """Own − other difference of means, its bootstrap CI and a two-sided test's p-value."""

    n_own: int
    n_other: int
    own_mean: float | None
    other_mean: float | None
    gap: float | None
    ci_low: float | None
    ci_high: float | None
    test: str
    p_value: float | None


class JudgeSelfPreference(BaseModel):
    judge: str
    family: str
    own_models: list[str]
    other_models: list[str]
    verdicts: int
    failed: int
    unpaired: Gap | None = None
    paired: Gap | None = None
    controlled: Gap | None = None
    note: str = ""


def family_of(model: str) -> str:
    """The model family of a spec (``local:qwen2.5-coder-1.5b`` → ``qwen2.5``); a non-spec name is its own."""
    try:
        return parse_spec(model).family
    except PersonagraphError:
        return model.strip().lower()


def _finite(value: float) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


def _quiet(fn: Any, *args: Any, **kwargs: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return fn(*args, **kwargs)


def unpaired_gap(
    own: Sequence[float], other: Sequence[float], *, seed: int = 0, n_resamples: int = 2000
) -> Gap:
    """Difference of means of two independent samples: Mann–Whitney U and a two-sample bootstrap CI."""
    a, b = np.asarray(own, dtype=float), np.asarray(other, dtype=float)
    gap = float(a.mean() - b.mean()) if a.size and b.size else None
    p_value = low = high = None
    if a.size and b.size:
        from scipy import stats  # imported where used (~0.6 s at start-up)

        p_value = _finite(_quiet(stats.mannwhitneyu, a, b, alternative="two-sided").pvalue)
    if a.size >= 2 and b.size >= 2:
        if np.ptp(a) == 0 and np.ptp(b) == 0:
            low = high = gap
        else:
            lo, hi = independent_bootstrap_ci((a, b), mean_difference, n_resamples=n_resamples, seed=seed)
            low, high = _finite(lo), _finite(hi)
    return Gap(
        n_own=int(a.size),
        n_other=int(b.size),
        own_mean=float(a.mean()) if a.size else None,
        other_mean=float(b.mean()) if b.size else None,
        gap=gap,
        ci_low=low,
        ci_high=high,
        test="Mann-Whitney U",
        p_value=p_value,
    )


def paired_gap(
    own: Sequence[float], other: Sequence[float], *, seed: int = 0, n_resamples: int = 2000
) -> Gap:
    """Mean of paired differences ``own - other``: Wilcoxon signed-rank and a bootstrap CI of the mean."""
    a, b = np.asarray(own, dtype=float), np.asarray(other, dtype=float)
    diff = a - b
    p_value = None
    if diff.size and np.any(diff != 0):
        from scipy import stats

        p_value = _finite(_quiet(stats.wilcoxon, a, b).pvalue)
    low, high = bootstrap_ci(diff, seed=seed, n_resamples=n_resamples)
    return Gap(
        n_own=int(a.size),
        n_other=int(b.size),
        own_mean=float(a.mean()) if a.size else None,
        other_mean=float(b.mean()) if b.size else None,
        gap=float(diff.mean()) if diff.size else None,
        ci_low=_finite(low),
        ci_high=_finite(high),
        test="Wilcoxon signed-rank",
        p_value=p_value,
    )


def self_preference(
    run_dir: str | Path, judges: Sequence[str] | None = None, *, seed: int = 0, n_resamples: int = 2000
) -> dict[str, Any]:
    """Self-preference of every judge (or of ``judges``) in an eval run; see the module docstring."""
    store = RunStore(run_dir, readonly=True)
    try:
        kind = store.get_meta("kind")
        if kind not in (None, "eval"):
            raise PersonagraphError(f"--self-preference {run_dir}: a run of kind {kind!r}, not an eval run")
        answers = {
            a.id: a for a in (Answer.model_validate(r) for r in store.records("answer")) if a.status == "ok"
        }
        verdicts = [
            v for v in (Verdict.model_validate(r) for r in store.records("verdict")) if v.answer_id in answers
        ]
    finally:
        store.close()
    if not answers or not verdicts:
        raise PersonagraphError(f"--self-preference {run_dir}: no judged answers in this run")
    found = list(dict.fromkeys(v.judge for v in verdicts))
    if judges:
        unknown = [j for j in judges if j not in found]
        if unknown:
            raise PersonagraphError(
                f"--self-preference {run_dir}: judge {unknown[0]} has no verdicts there "
                f"(judges: {', '.join(found)})"
            )
        found = list(dict.fromkeys(judges))
    models = sorted({a.model for a in answers.values()})
    score: dict[tuple[str, str], float] = {
        (v.judge, v.answer_id): float(v.score) for v in verdicts if v.status == "ok" and v.score is not None
    }
    all_judges = list(dict.fromkeys(v.judge for v in verdicts))
    results = []
    for judge in found:
        family = family_of(judge)
        own_models = [m for m in models if m == judge or family_of(m) == family]
        other_models = [m for m in models if m not in own_models]
        mine = [v for v in verdicts if v.judge == judge]
        entry = JudgeSelfPreference(
            judge=judge,
            family=family,
            own_models=own_models,
            other_models=other_models,
            verdicts=len(mine),
            failed=sum(v.status != "ok" or v.score is None for v in mine),
        )
        if not own_models or not other_models:
            entry.note = "no answers of its own family" if not own_models else "no answers of other models"
            results.append(entry)
            continue
        own_ids = {a.id for a in answers.values() if a.model in own_models}
        judged = [a for a in answers.values() if (judge, a.id) in score]
        own = [score[(judge, a.id)] for a in judged if a.id in own_ids]
        other = [score[(judge, a.id)] for a in judged if a.id not in own_ids]
        entry.unpaired = unpaired_gap(own, other, seed=seed, n_resamples=n_resamples)

        by_question: dict[str, tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
        for a in judged:
            by_question[a.question_id][0 if a.id in own_ids else 1].append(score[(judge, a.id)])
        pairs = [(np.mean(o), np.mean(t)) for o, t in by_question.values() if o and t]
        if pairs:
            entry.paired = paired_gap(
                [p[0] for p in pairs], [p[1] for p in pairs], seed=seed, n_resamples=n_resamples
            )

        controls = [j for j in all_judges if j != judge and family_of(j) != family]
        if controls:
            delta_own, delta_other = [], []
            for a in judged:
                others = [score[(c, a.id)] for c in controls if (c, a.id) in score]
                if others:
                    (delta_own if a.id in own_ids else delta_other).append(
                        score[(judge, a.id)] - float(np.mean(others))
                    )
            entry.controlled = unpaired_gap(delta_own, delta_other, seed=seed, n_resamples=n_resamples)
        else:
            entry.note = "no judge of another family to control for answer quality"
        results.append(entry)
    return {
        "run_dir": str(run_dir),
        "models": models,
        "judges": [r.model_dump(mode="json") for r in results],
    }
