"""Statistics for evaluation summaries and judge meta-evaluation.

Thin, typed wrappers around scipy, scikit-learn and krippendorff. Conventions:

* Bootstrap intervals come from :func:`scipy.stats.bootstrap` (BCa by default, seeded, so
  repeatable). With fewer than two observations a bootstrap carries no information about spread,
  so intervals are ``(nan, nan)``; constant data gives the zero-width interval ``(x, x)``.
* Pydantic models report an undefined quantity (a mean of nothing, a correlation of a constant)
  as ``None`` rather than NaN, so they serialise to JSON cleanly.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from typing import Literal

import krippendorff
import numpy as np
import sklearn
from pydantic import BaseModel
from scipy import stats
from sklearn.exceptions import UndefinedMetricWarning
from sklearn.metrics import cohen_kappa_score

BootstrapMethod = Literal["BCa", "percentile", "basic"]
MeasurementLevel = Literal["nominal", "ordinal", "interval", "ratio"]

# Warnings the wrapped libraries raise for degenerate input that we report as NaN / None instead
# (scipy's ConstantInputWarning, DegenerateDataWarning and SmallSampleWarning are RuntimeWarnings).
_DEGENERATE_WARNINGS: tuple[type[Warning], ...] = (RuntimeWarning, UndefinedMetricWarning)


class Stats(BaseModel):
    """Summary of a sample of scores.

    Attributes:
        n: Number of observations.
        mean: Sample mean; None when ``n == 0``.
        std: Sample standard deviation (ddof=1); None when ``n < 2``.
        ci_low: Lower bound of the bootstrap CI of the mean; None when ``n < 2``.
        ci_high: Upper bound of the bootstrap CI of the mean; None when ``n < 2``.
    """

    n: int
    mean: float | None
    std: float | None
    ci_low: float | None
    ci_high: float | None


class Estimate(BaseModel):
    """A point estimate with its bootstrap confidence interval; None where undefined."""

    value: float | None
    ci_low: float | None
    ci_high: float | None


class AgreementReport(BaseModel):
    """Agreement between judge scores and human scores over the same items.

    Attributes:
        n: Number of items.
        scale: Inclusive ``(low, high)`` bounds of the human integer scale.
        spearman: Spearman rank correlation.
        kendall: Kendall tau-b.
        quadratic_kappa: Quadratic-weighted Cohen's kappa on scores rounded into the scale.
        mae: Mean absolute error of the raw judge scores against the human scores.
    """

    n: int
    scale: tuple[int, int]
    spearman: Estimate
    kendall: Estimate
    quadratic_kappa: Estimate
    mae: Estimate


def _none_if_nan(value: float) -> float | None:
    """Return ``value`` as a float, or None when it is NaN or infinite."""
    value = float(value)
    return value if math.isfinite(value) else None


def _interval(
    data: tuple[np.ndarray, ...],
    statistic: Callable[..., float],
    *,
    paired: bool,
    confidence: float,
    n_resamples: int,
    seed: int,
    method: BootstrapMethod,
) -> tuple[float, float]:
    """Run scipy's bootstrap on ``data`` (all samples have n >= 2) and return finite bounds if possible.

    When the requested method yields a non-finite bound (BCa on a near-degenerate bootstrap
    distribution, or a statistic undefined on some resamples, e.g. a correlation of a constant
    resample), fall back to the percentile interval over the resamples where the statistic is defined.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", _DEGENERATE_WARNINGS)
        result = stats.bootstrap(
            data,
            statistic,
            n_resamples=n_resamples,
            paired=paired,
            confidence_level=confidence,
            method=method,
            rng=np.random.default_rng(seed),
        )
    low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
    if math.isfinite(low) and math.isfinite(high):
        return low, high
    distribution = np.asarray(result.bootstrap_distribution, dtype=float)
    distribution = distribution[np.isfinite(distribution)]
    if distribution.size == 0:
        return math.nan, math.nan
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(distribution, [tail, 100 - tail])
    return float(low), float(high)


def bootstrap_ci(
    values: Sequence[float],
    statistic: Callable[..., float] = np.mean,
    *,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
    method: BootstrapMethod = "BCa",
) -> tuple[float, float]:
    """Bootstrap confidence interval of ``statistic`` over ``values``.

    Args:
        values: Finite observations.
        statistic: Function of a 1-D array (vectorised automatically if it accepts ``axis``).
        confidence: Confidence level of the two-sided interval.
        n_resamples: Number of bootstrap resamples.
        seed: Seed of the resampling generator; the same inputs always give the same interval.
        method: scipy bootstrap method.

    Returns:
        ``(low, high)``. ``(nan, nan)`` when there are fewer than two values; ``(s, s)`` with
        ``s = statistic(values)`` when all values are equal (every resample is the sample itself).
    """
    sample = np.asarray(values, dtype=float)
    if sample.size < 2:
        return math.nan, math.nan
    if np.all(sample == sample[0]):
        point = float(statistic(sample))
        return point, point
    return _interval(
        (sample,),
        statistic,
        paired=False,
        confidence=confidence,
        n_resamples=n_resamples,
        seed=seed,
        method=method,
    )


def paired_bootstrap_ci(
    a: Sequence[float],
    b: Sequence[float],
    statistic: Callable[[np.ndarray, np.ndarray], float],
    *,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
    method: BootstrapMethod = "BCa",
) -> tuple[float, float]:
    """Bootstrap confidence interval of a statistic over paired arrays, resampling pairs.

    Args:
        a: First member of each pair.
        b: Second member of each pair; same length as ``a``.
        statistic: ``statistic(a_resample, b_resample) -> float``, e.g. a Spearman correlation.
        confidence: Confidence level of the two-sided interval.
        n_resamples: Number of bootstrap resamples.
        seed: Seed of the resampling generator.
        method: scipy bootstrap method.

    Returns:
        ``(low, high)``; ``(nan, nan)`` with fewer than two pairs, ``(s, s)`` when every pair is
        identical. Resamples on which the statistic is undefined (NaN) are ignored when they would
        otherwise make the interval NaN.

    Raises:
        ValueError: If ``a`` and ``b`` differ in length.
    """
    first, second = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if first.shape != second.shape:
        raise ValueError(f"paired samples differ in length: {first.size} vs {second.size}")
    if first.size < 2:
        return math.nan, math.nan
    if np.all(first == first[0]) and np.all(second == second[0]):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", _DEGENERATE_WARNINGS)
            point = float(statistic(first, second))
        return point, point
    return _interval(
        (first, second),
        statistic,
        paired=True,
        confidence=confidence,
        n_resamples=n_resamples,
        seed=seed,
        method=method,
    )


def describe(values: Sequence[float], *, confidence: float = 0.95, seed: int = 0) -> Stats:
    """Summarise scores: count, mean, sample standard deviation and bootstrap CI of the mean.

    Args:
        values: Finite observations.
        confidence: Confidence level of the interval.
        seed: Bootstrap seed.

    Returns:
        The summary; see :class:`Stats` for which fields are None on small samples.
    """
    sample = np.asarray(values, dtype=float)
    n = int(sample.size)
    mean = float(np.mean(sample)) if n else None
    std = float(np.std(sample, ddof=1)) if n >= 2 else None
    low, high = bootstrap_ci(sample, np.mean, confidence=confidence, seed=seed)
    return Stats(n=n, mean=mean, std=std, ci_low=_none_if_nan(low), ci_high=_none_if_nan(high))


def krippendorff_alpha(
    ratings: Sequence[Sequence[float | None]], level: MeasurementLevel = "ordinal"
) -> float | None:
    """Krippendorff's alpha for a raters x items matrix.

    Args:
        ratings: One row per rater, one column per item; None marks a missing rating.
        level: Level of measurement of the ratings.

    Returns:
        Alpha, or None when there are fewer than two raters or alpha is undefined (e.g. every
        rating has the same value, or no item has two ratings).

    Raises:
        ValueError: If the rows differ in length.
    """
    if len(ratings) < 2:
        return None
    if len({len(row) for row in ratings}) != 1:
        raise ValueError("every rater needs one entry (or None) per item")
    matrix = np.array([[math.nan if r is None else float(r) for r in row] for row in ratings], dtype=float)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", _DEGENERATE_WARNINGS)
            alpha = krippendorff.alpha(reliability_data=matrix, level_of_measurement=level)
    except (ValueError, ZeroDivisionError):
        return None
    return _none_if_nan(alpha)


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
    return float(stats.spearmanr(x, y).statistic)


def _kendall(x: np.ndarray, y: np.ndarray) -> float:
    return float(stats.kendalltau(x, y).statistic)


def _estimate(
    x: np.ndarray,
    y: np.ndarray,
    statistic: Callable[[np.ndarray, np.ndarray], float],
    *,
    confidence: float,
    n_resamples: int,
    seed: int,
) -> Estimate:
    """Point estimate of a paired statistic plus its paired bootstrap CI."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", _DEGENERATE_WARNINGS)
        value = _none_if_nan(statistic(x, y)) if x.size else None
    if value is None:
        return Estimate(value=None, ci_low=None, ci_high=None)
    low, high = paired_bootstrap_ci(
        x, y, statistic, confidence=confidence, n_resamples=n_resamples, seed=seed
    )
    return Estimate(value=value, ci_low=_none_if_nan(low), ci_high=_none_if_nan(high))


def agreement_report(
    judge_scores: Sequence[float],
    human_scores: Sequence[float],
    scale: tuple[int, int],
    *,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> AgreementReport:
    """How well a judge agrees with human raters on the same items.

    Spearman and Kendall use the raw scores. Cohen's kappa (quadratic weights) needs categories,
    so both score lists are rounded to the nearest integer and clipped into ``scale`` first (a
    no-op for integer human scores). MAE compares raw judge scores to human scores. Every metric
    gets a paired bootstrap CI over items.

    Args:
        judge_scores: The judge's score per item.
        human_scores: The human score per item, within ``scale``.
        scale: Inclusive ``(low, high)`` bounds of the integer human scale, e.g. ``(1, 5)``.
        confidence: Confidence level of the intervals.
        n_resamples: Bootstrap resamples per metric.
        seed: Bootstrap seed.

    Returns:
        The report; undefined metrics (e.g. a correlation with constant scores) are None.

    Raises:
        ValueError: On length mismatch, an empty scale, or human scores outside the scale.
    """
    judge, human = np.asarray(judge_scores, dtype=float), np.asarray(human_scores, dtype=float)
    low, high = scale
    if judge.shape != human.shape:
        raise ValueError(f"{judge.size} judge scores but {human.size} human scores")
    if low >= high:
        raise ValueError(f"scale {scale} must have low < high")
    if np.any((human < low) | (human > high)):
        raise ValueError(f"human scores must lie within the scale {scale}")

    labels = list(range(low, high + 1))

    def quadratic_kappa(x: np.ndarray, y: np.ndarray) -> float:
        rounded_x = np.clip(np.rint(x), low, high).astype(int)
        rounded_y = np.clip(np.rint(y), low, high).astype(int)
        # Called once per resample: skip sklearn's per-call argument validation (inputs are checked above).
        with sklearn.config_context(skip_parameter_validation=True):
            return float(cohen_kappa_score(rounded_x, rounded_y, labels=labels, weights="quadratic"))

    def mae(x: np.ndarray, y: np.ndarray) -> float:
        return float(np.mean(np.abs(x - y)))

    options = {"confidence": confidence, "n_resamples": n_resamples, "seed": seed}
    return AgreementReport(
        n=int(judge.size),
        scale=(low, high),
        spearman=_estimate(judge, human, _spearman, **options),
        kendall=_estimate(judge, human, _kendall, **options),
        quadratic_kappa=_estimate(judge, human, quadratic_kappa, **options),
        mae=_estimate(judge, human, mae, **options),
    )


def length_correlation(
    scores: Sequence[float],
    texts: Sequence[str],
    *,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> Estimate:
    """Spearman correlation between scores and response length (whitespace tokens), with a CI.

    A strong positive value suggests a judge rewarding verbosity.

    Args:
        scores: One score per response.
        texts: The scored responses, same order.
        confidence: Confidence level of the interval.
        n_resamples: Bootstrap resamples.
        seed: Bootstrap seed.

    Returns:
        The correlation; its value is None when undefined (fewer than two items, or constant
        scores or lengths).

    Raises:
        ValueError: If ``scores`` and ``texts`` differ in length.
    """
    if len(scores) != len(texts):
        raise ValueError(f"{len(scores)} scores but {len(texts)} texts")
    lengths = np.array([len(text.split()) for text in texts], dtype=float)
    return _estimate(
        np.asarray(scores, dtype=float),
        lengths,
        _spearman,
        confidence=confidence,
        n_resamples=n_resamples,
        seed=seed,
    )
