"""Statistics for evaluation summaries and judge meta-evaluation.

Typed wrappers around scipy, scikit-learn and krippendorff, plus one vectorised bootstrap. Conventions:

* Bootstrap intervals (BCa by default, seeded, so repeatable) draw every resample's indices at once,
  ``rng.integers(0, n, size=(B, n))`` (the draws of :func:`scipy.stats.bootstrap`, with scipy's
  percentile, basic and BCa definitions), and evaluate the statistic over all rows in one call: summaries
  compute many intervals and a Python loop over resamples cost more than the rest of the summary. This
  module is the one place for bootstrap intervals: single samples, pairs, and independent samples or
  strata. With fewer than two observations a bootstrap carries no information about spread, so
  intervals are ``(nan, nan)``; constant data gives the zero-width interval ``(x, x)``.
* Pydantic models report an undefined quantity (a mean of nothing, a correlation of a constant)
  as ``None`` rather than NaN, so they serialise to JSON cleanly.
"""

from __future__ import annotations

import functools
import inspect
import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any, Literal

import krippendorff
import numpy as np
from pydantic import BaseModel
from scipy import special

BootstrapMethod = Literal["BCa", "percentile", "basic"]
MeasurementLevel = Literal["nominal", "ordinal", "interval", "ratio"]

# Warnings the wrapped libraries raise for degenerate input that we report as NaN / None instead
# (scipy's ConstantInputWarning, DegenerateDataWarning and SmallSampleWarning are RuntimeWarnings). A
# scikit-learn statistic silences its own UserWarnings (behavior's κ does): importing scikit-learn here
# for its UndefinedMetricWarning cost every command about a second at start-up.
_DEGENERATE_WARNINGS: tuple[type[Warning], ...] = (RuntimeWarning,)


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


# A resample statistic maps index arrays, one ``(m, n_k)`` array per sample (row r of each array: the
# observations drawn in resample r), to the m values of the statistic. Working on indices rather than
# values lets a statistic use the structure of a resample (Kendall's tau counts copies of each pair).
IndexStatistic = Callable[[tuple[np.ndarray, ...]], np.ndarray]

# Resamples are drawn and evaluated in batches of at most this many indices (~32 MB of int64), so
# memory stays bounded for large n x B. numpy's Generator draws the same indices whether asked for
# them at once or in row batches, so for one sample (or pairs) batching changes no result; with
# several independent samples a batch draws each sample's rows in turn, which is still deterministic.
_BATCH_ELEMENTS = 1 << 22


def _rows_per_batch(width: int) -> int:
    """How many resamples of ``width`` indices make one batch."""
    return max(1, _BATCH_ELEMENTS // max(width, 1))


@functools.lru_cache(maxsize=256)  # a run's summary asks it of the same few statistics for every CI
def _accepts_axis(statistic: Callable[..., Any]) -> bool:
    """Whether ``statistic`` takes an ``axis`` argument (and so evaluates all resamples in one call)."""
    try:
        return "axis" in inspect.signature(statistic).parameters
    except (TypeError, ValueError):
        return False


def _by_rows(statistic: Callable[..., Any]) -> Callable[..., np.ndarray]:
    """``statistic`` applied to each row of 2-D samples, vectorised when it accepts ``axis``.

    A statistic without ``axis`` is called once per row: correct for any function, but a Python loop.
    """
    if _accepts_axis(statistic):
        return lambda *rows: np.asarray(statistic(*rows, axis=-1), dtype=float)

    def looped(*rows: np.ndarray) -> np.ndarray:
        return np.array([statistic(*(r[i] for r in rows)) for i in range(rows[0].shape[0])], dtype=float)

    return looped


def _gather(samples: Sequence[np.ndarray], statistic: Callable[..., Any], *, paired: bool) -> IndexStatistic:
    """The resample statistic that evaluates ``statistic`` on the drawn values.

    Paired samples share one index array (pairs are drawn together); otherwise each sample has its own.
    """
    rows = _by_rows(statistic)
    if paired:
        return lambda idx: rows(*(sample[idx[0]] for sample in samples))
    return lambda idx: rows(*(sample[i] for sample, i in zip(samples, idx, strict=True)))


def _full(sizes: Sequence[int]) -> tuple[np.ndarray, ...]:
    """Index arrays selecting each whole sample once: the statistic on the original data."""
    return tuple(np.arange(n)[None, :] for n in sizes)


def _distribution(
    sizes: Sequence[int], theta: IndexStatistic, n_resamples: int, rng: np.random.Generator
) -> np.ndarray:
    """The bootstrap distribution: ``theta`` on ``n_resamples`` resamples drawn with replacement.

    Each batch draws ``rng.integers(0, n_k, size=(rows, n_k))`` per sample, the same draws (for a
    single batch) as :func:`scipy.stats.bootstrap` with that generator.
    """
    rows = _rows_per_batch(sum(sizes))
    parts = []
    for start in range(0, n_resamples, rows):
        m = min(rows, n_resamples - start)
        parts.append(np.asarray(theta(tuple(rng.integers(0, n, size=(m, n)) for n in sizes)), dtype=float))
    return np.concatenate(parts)


def _jackknife(sizes: Sequence[int], theta: IndexStatistic) -> list[np.ndarray]:
    """Per sample, ``theta`` with each of its observations left out in turn (the others whole)."""
    full = _full(sizes)
    values = []
    for k, n in enumerate(sizes):
        keep = np.arange(n - 1)[None, :]
        rows = _rows_per_batch(sum(sizes))
        parts = []
        for start in range(0, n, rows):
            left_out = np.arange(start, min(n, start + rows))[:, None]
            drop = keep + (keep >= left_out)  # row i: 0..n-1 without left_out[i]
            m = drop.shape[0]
            idx = tuple(
                drop if j == k else np.broadcast_to(full[j], (m, size)) for j, size in enumerate(sizes)
            )
            parts.append(np.asarray(theta(idx), dtype=float))
        values.append(np.concatenate(parts))
    return values


def _mean_jackknife(sample: np.ndarray) -> list[np.ndarray] | None:
    """The leave-one-out means of ``sample`` as :func:`_jackknife` computes them with ``np.mean``, in O(n):
    ``(sum - x_i) / (n - 1)``. The same floats when every sum of the values is exact, in any order: values
    that are multiples of 2^-10 (integer scores, their halves and quarters) with an absolute sum below
    2^43, since ``np.mean`` divides the sum by the count; None for other samples. Evaluating n means of
    n - 1 values would be O(n²): half of the time of a task's CI at 5,000 items."""
    scaled = sample * 1024.0
    if not np.all(scaled == np.rint(scaled)) or not float(np.abs(scaled).sum()) < 2.0**53:
        return None
    return [(sample.sum() - sample) / (sample.size - 1)]


def _bca_levels(
    theta_hat: float, distribution: np.ndarray, jackknife: list[np.ndarray], alpha: float
) -> tuple[float, float]:
    """Quantile levels of the BCa interval (Efron & Tibshirani 14.3, 15.4; as scipy computes them).

    NaN when the bias correction or the acceleration is undefined (a degenerate distribution).
    """
    below = np.count_nonzero(distribution < theta_hat) + np.count_nonzero(distribution <= theta_hat)
    z0 = special.ndtri(below / (2 * distribution.size))
    num = den = np.float64(0.0)
    for values in jackknife:
        n = float(values.size)
        u = (n - 1) * (values.mean() - values)
        num += np.sum(u**3) / n**3
        den += np.sum(u**2) / n**2
    acceleration = num / (6 * den**1.5)
    z_alpha = float(special.ndtri(alpha))
    levels = []
    for z in (z_alpha, -z_alpha):
        shifted = z0 + z
        levels.append(float(special.ndtr(z0 + shifted / (1 - acceleration * shifted))))
    return levels[0], levels[1]


def _bootstrap_interval(
    sizes: Sequence[int],
    theta: IndexStatistic,
    *,
    confidence: float,
    n_resamples: int,
    seed: int,
    method: BootstrapMethod,
    jackknife: list[np.ndarray] | None = None,
) -> tuple[float, float]:
    """Bootstrap CI of ``theta`` over samples of ``sizes`` (each n >= 2), all resamples at once.

    The same seed gives the same interval. When the requested method yields a non-finite bound (BCa
    on a near-degenerate bootstrap distribution, or a statistic undefined on some resamples, e.g. a
    correlation of a constant resample), fall back to the percentile interval over the resamples
    where the statistic is defined. ``jackknife``: BCa's leave-one-out values of ``theta`` where they
    are known without evaluating it (:func:`_mean_jackknife`).
    """
    if method not in ("BCa", "percentile", "basic"):
        raise ValueError(f"unknown bootstrap method {method!r}")
    alpha = (1 - confidence) / 2
    with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
        warnings.simplefilter("ignore", _DEGENERATE_WARNINGS)
        distribution = _distribution(sizes, theta, n_resamples, np.random.default_rng(seed))
        levels = (alpha, 1 - alpha)
        if method != "percentile":
            theta_hat = float(theta(_full(sizes))[0])
        if method == "BCa":
            levels = _bca_levels(theta_hat, distribution, jackknife or _jackknife(sizes, theta), alpha)
        low = high = math.nan
        if all(math.isfinite(level) for level in levels):
            low, high = (float(q) for q in np.quantile(distribution, levels))
        if method == "basic":
            low, high = 2 * theta_hat - high, 2 * theta_hat - low
    if math.isfinite(low) and math.isfinite(high):
        return low, high
    distribution = distribution[np.isfinite(distribution)]
    if distribution.size == 0:
        return math.nan, math.nan
    low, high = np.quantile(distribution, [alpha, 1 - alpha])
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
        statistic: Function of a 1-D array; when it accepts ``axis`` (like ``np.mean``) every
            resample is evaluated in one call on a ``(n_resamples, n)`` array, else once per resample.
        confidence: Confidence level of the two-sided interval.
        n_resamples: Number of bootstrap resamples.
        seed: Seed of the resampling generator; the same inputs always give the same interval.
        method: ``BCa``, ``percentile`` or ``basic`` (scipy's definitions).

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
    return _bootstrap_interval(
        (sample.size,),
        _gather((sample,), statistic, paired=True),
        confidence=confidence,
        n_resamples=n_resamples,
        seed=seed,
        method=method,
        jackknife=_mean_jackknife(sample) if statistic is np.mean and method == "BCa" else None,
    )


def paired_bootstrap_ci(
    a: Sequence[float],
    b: Sequence[float],
    statistic: Callable[..., float],
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
        statistic: ``statistic(a_resample, b_resample) -> float``, e.g. a Spearman correlation;
            vectorised over resamples when it accepts ``axis`` (see :func:`spearman`).
        confidence: Confidence level of the two-sided interval.
        n_resamples: Number of bootstrap resamples.
        seed: Seed of the resampling generator.
        method: ``BCa``, ``percentile`` or ``basic``.

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
    return _bootstrap_interval(
        (first.size,),
        _gather((first, second), statistic, paired=True),
        confidence=confidence,
        n_resamples=n_resamples,
        seed=seed,
        method=method,
    )


def independent_bootstrap_ci(
    samples: Sequence[Sequence[float]],
    statistic: Callable[..., float],
    *,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
    method: BootstrapMethod = "BCa",
) -> tuple[float, float]:
    """Bootstrap CI of a statistic of several independent samples, resampling within each sample.

    Used for two-group differences and for stratified estimates (e.g. the mean of per-task means,
    :func:`mean_of_means`, resampling items within each task), so every stratum keeps its size.

    Args:
        samples: The samples (strata); each needs two or more observations.
        statistic: ``statistic(*sample_resamples) -> float``; vectorised over resamples when it
            accepts ``axis`` (then it gets one ``(n_resamples, n_k)`` array per sample).
        confidence: Confidence level of the two-sided interval.
        n_resamples: Number of bootstrap resamples.
        seed: Seed of the resampling generator.
        method: ``BCa``, ``percentile`` or ``basic``.

    Returns:
        ``(low, high)``; ``(nan, nan)`` when there is no sample or one has fewer than two
        observations, ``(s, s)`` when every sample is constant.
    """
    arrays = [np.asarray(sample, dtype=float) for sample in samples]
    if not arrays or any(array.size < 2 for array in arrays):
        return math.nan, math.nan
    if all(np.all(array == array[0]) for array in arrays):
        point = float(statistic(*arrays))
        return point, point
    return _bootstrap_interval(
        tuple(array.size for array in arrays),
        _gather(arrays, statistic, paired=False),
        confidence=confidence,
        n_resamples=n_resamples,
        seed=seed,
        method=method,
    )


def mean_of_means(*samples: np.ndarray, axis: int = -1) -> np.ndarray:
    """Unweighted mean of the samples' means along ``axis``: every sample (stratum) counts once."""
    return np.mean([np.mean(sample, axis=axis) for sample in samples], axis=0)


def mean_difference(first: np.ndarray, second: np.ndarray, axis: int = -1) -> np.ndarray:
    """Mean of ``first`` minus mean of ``second`` along ``axis`` (two independent groups)."""
    return np.mean(first, axis=axis) - np.mean(second, axis=axis)


def hierarchical_bootstrap_ci(
    strata: Sequence[Sequence[Sequence[float]]],
    *,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
    """Two-stage percentile bootstrap CI of the mean over strata of the mean over units of the mean over
    each unit's repeats: e.g. tasks, their questions, and each question's repeated samples.

    Every resample draws, within each stratum, as many units as it has (with replacement), then for each
    drawn unit as many of its repeats as it has (with replacement): the interval covers the spread between
    units and between repeats of one unit. One repeat per unit is the stratified bootstrap of
    :func:`mean_of_means`.

    Args:
        strata: per stratum, per unit, the unit's repeated observations (units with none are left out).
        confidence: Confidence level of the two-sided interval.
        n_resamples: Number of bootstrap resamples.
        seed: Seed of the resampling generator; the same inputs always give the same interval.

    Returns:
        ``(low, high)``; ``(nan, nan)`` when a stratum has no observation or there are fewer than two in
        all; ``(s, s)`` when every observation is equal.
    """
    tables, values = [], []
    for stratum in strata:
        units = [np.asarray(u, dtype=float) for u in stratum if len(u)]
        if not units:
            return math.nan, math.nan
        counts = np.array([u.size for u in units])
        table = np.zeros((len(units), int(counts.max())))  # a row per unit, its repeats first
        for row, unit in enumerate(units):
            table[row, : unit.size] = unit
        tables.append((table, counts))
        values += units
    every = np.concatenate(values) if values else np.array([])
    if every.size < 2:
        return math.nan, math.nan
    if np.all(every == every[0]):
        return float(every[0]), float(every[0])
    rng = np.random.default_rng(seed)
    alpha = (1 - confidence) / 2
    rows = _rows_per_batch(max(t.size for t, _ in tables))
    parts = []
    for start in range(0, n_resamples, rows):
        b = min(rows, n_resamples - start)
        means = []
        for table, counts in tables:
            n, width = table.shape
            units = rng.integers(0, n, size=(b, n))
            drawn = counts[units]  # (b, n): how many repeats each drawn unit has
            repeats = (rng.random((b, n, width)) * drawn[..., None]).astype(int)
            keep = np.arange(width) < drawn[..., None]
            sums = np.where(keep, table[units[..., None], repeats], 0.0).sum(axis=-1)
            means.append((sums / drawn).mean(axis=-1))
        parts.append(np.mean(means, axis=0))
    low, high = np.quantile(np.concatenate(parts), [alpha, 1 - alpha])
    return float(low), float(high)


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


def _pearson(x: np.ndarray, y: np.ndarray, axis: int) -> np.ndarray:
    """Pearson correlation along ``axis``; NaN where either side is constant."""
    dx = x - np.mean(x, axis=axis, keepdims=True)
    dy = y - np.mean(y, axis=axis, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.sum(dx * dy, axis=axis) / np.sqrt(np.sum(dx * dx, axis=axis) * np.sum(dy * dy, axis=axis))
    return np.clip(r, -1.0, 1.0)


def spearman(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    """Spearman's rho along ``axis`` (Pearson correlation of average ranks), one value per row.

    Vectorised so a bootstrap evaluates every resample in one call; NaN where either side is constant.
    """
    from scipy import stats  # scipy.stats is imported where used: it adds ~0.6 s to every command's start

    return _pearson(stats.rankdata(x, axis=axis), stats.rankdata(y, axis=axis), axis)


def _rank_lookup(values: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """Average ranks (1-based, ties averaged, as ``rankdata``) of resampled ``values``, without sorting.

    A resample only holds copies of the original values, so counting how many copies of each
    distinct value a row drew gives every rank by a cumulative sum: O(n) per row instead of a sort.
    The returned function maps ``(m, k)`` index rows to the ``(m, k)`` ranks within each row.
    """
    distinct, group = np.unique(values, return_inverse=True)
    group = group.ravel()
    g = distinct.size

    def ranks(rows: np.ndarray) -> np.ndarray:
        member = group[rows]
        m = member.shape[0]
        counts = np.bincount((member + g * np.arange(m)[:, None]).ravel(), minlength=m * g).reshape(m, g)
        average = np.cumsum(counts, axis=1) - counts + (counts + 1) / 2
        return np.take_along_axis(average, member, axis=1)

    return ranks


def _spearman_statistic(x: np.ndarray, y: np.ndarray) -> IndexStatistic:
    """Spearman's rho of paired samples as a resample statistic: :func:`spearman` on the drawn pairs,
    with ranks from counts (:func:`_rank_lookup`) rather than a sort per resample."""
    x_ranks, y_ranks = _rank_lookup(x), _rank_lookup(y)
    return lambda idx: _pearson(x_ranks(idx[0]), y_ranks(idx[0]), axis=-1)


def quadratic_weighted_kappa(
    x: np.ndarray, y: np.ndarray, scale: tuple[int, int], axis: int = -1
) -> np.ndarray:
    """Cohen's kappa with quadratic weights along ``axis``, on scores rounded and clipped into ``scale``.

    With quadratic weights the observed and chance disagreements are moments, so kappa is
    ``1 - mean((a - b)^2) / (var(a) + var(b) + (mean(a) - mean(b))^2)``: exactly scikit-learn's
    ``cohen_kappa_score(a, b, labels=range(low, high + 1), weights="quadratic")``, vectorised over rows.
    NaN where both sides are the same constant.
    """
    low, high = scale
    a = np.clip(np.rint(x), low, high)
    b = np.clip(np.rint(y), low, high)
    observed = np.mean((a - b) ** 2, axis=axis)
    chance = (
        np.var(a, axis=axis) + np.var(b, axis=axis) + (np.mean(a, axis=axis) - np.mean(b, axis=axis)) ** 2
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        return 1 - observed / chance


def mean_absolute_error(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    """Mean absolute difference along ``axis``."""
    return np.mean(np.abs(np.asarray(x) - np.asarray(y)), axis=axis)


def _kendall_statistic(x: np.ndarray, y: np.ndarray) -> IndexStatistic:
    """Kendall's tau-b of paired samples as a resample statistic, vectorised over resamples.

    Tau-b depends only on how many copies of each distinct pair ``(x_i, y_i)`` a resample holds. With
    ``c`` those counts, ``S`` the sign agreement of two distinct pairs and ``G`` their grouping by
    equal x (or y), concordant minus discordant pairs is ``c' S c / 2`` and tied pairs are
    ``(|G' c|^2 - n) / 2``: matrix products over all resamples at once, no per-resample sort.
    """
    distinct, code = np.unique(np.column_stack([x, y]), axis=0, return_inverse=True)
    code = code.ravel()
    u = distinct.shape[0]
    dx = np.sign(distinct[:, 0, None] - distinct[None, :, 0])
    dy = np.sign(distinct[:, 1, None] - distinct[None, :, 1])
    agreement = dx * dy
    # One-hot (distinct pair -> distinct x value), and the same for y.
    x_groups, y_groups = (
        np.eye(values.size)[group.ravel()]
        for values, group in (np.unique(column, return_inverse=True) for column in distinct.T)
    )

    def theta(idx: tuple[np.ndarray, ...]) -> np.ndarray:
        rows = idx[0]
        m, n = rows.shape
        flat = (code[rows] + u * np.arange(m)[:, None]).ravel()
        counts = np.bincount(flat, minlength=m * u).reshape(m, u).astype(float)
        score = np.einsum("ij,ij->i", counts @ agreement, counts) / 2
        pairs = n * (n - 1) / 2
        tied_x = (np.sum((counts @ x_groups) ** 2, axis=1) - n) / 2
        tied_y = (np.sum((counts @ y_groups) ** 2, axis=1) - n) / 2
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.clip(score / np.sqrt((pairs - tied_x) * (pairs - tied_y)), -1.0, 1.0)

    return theta


def _estimate(
    x: np.ndarray,
    y: np.ndarray,
    theta: IndexStatistic,
    *,
    confidence: float,
    n_resamples: int,
    seed: int,
) -> Estimate:
    """Point estimate of a paired resample statistic plus its paired bootstrap CI (BCa)."""
    n = int(x.size)
    if n == 0:
        return Estimate(value=None, ci_low=None, ci_high=None)
    with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
        warnings.simplefilter("ignore", _DEGENERATE_WARNINGS)
        value = _none_if_nan(theta(_full((n,)))[0])
    if value is None or n < 2:
        return Estimate(value=value, ci_low=None, ci_high=None)
    if np.all(x == x[0]) and np.all(y == y[0]):
        return Estimate(value=value, ci_low=value, ci_high=value)
    low, high = _bootstrap_interval(
        (n,), theta, confidence=confidence, n_resamples=n_resamples, seed=seed, method="BCa"
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
    gets a paired bootstrap CI over items, all resamples evaluated at once.

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

    def kappa(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
        return quadratic_weighted_kappa(x, y, (low, high), axis=axis)

    def paired(statistic: Callable[..., np.ndarray]) -> IndexStatistic:
        return _gather((judge, human), statistic, paired=True)

    options = {"confidence": confidence, "n_resamples": n_resamples, "seed": seed}
    return AgreementReport(
        n=int(judge.size),
        scale=(low, high),
        spearman=_estimate(judge, human, _spearman_statistic(judge, human), **options),
        kendall=_estimate(judge, human, _kendall_statistic(judge, human), **options),
        quadratic_kappa=_estimate(judge, human, paired(kappa), **options),
        mae=_estimate(judge, human, paired(mean_absolute_error), **options),
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
    values = np.asarray(scores, dtype=float)
    lengths = np.array([len(text.split()) for text in texts], dtype=float)
    return _estimate(
        values,
        lengths,
        _spearman_statistic(values, lengths),
        confidence=confidence,
        n_resamples=n_resamples,
        seed=seed,
    )


def spearman_difference(
    first: Sequence[float],
    second: Sequence[float],
    human: Sequence[float],
    *,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> Estimate:
    """ρ(first, human) − ρ(second, human) on the same items, with a paired bootstrap CI (items resampled
    together): whether one scorer (a judge) ranks the items better than another (a baseline).

    Raises:
        ValueError: If the three samples differ in length.
    """
    a, b, h = (np.asarray(x, dtype=float) for x in (first, second, human))
    if not a.shape == b.shape == h.shape:
        raise ValueError(f"samples differ in length: {a.size}, {b.size}, {h.size}")
    a_ranks, b_ranks, h_ranks = _rank_lookup(a), _rank_lookup(b), _rank_lookup(h)

    def theta(idx: tuple[np.ndarray, ...]) -> np.ndarray:
        rows, target = idx[0], h_ranks(idx[0])
        return _pearson(a_ranks(rows), target, axis=-1) - _pearson(b_ranks(rows), target, axis=-1)

    return _estimate(a, h, theta, confidence=confidence, n_resamples=n_resamples, seed=seed)


def pair_credit(original: np.ndarray, variant: np.ndarray) -> np.ndarray:
    """Per pair: 1 when the original scored higher, ½ on a tie, 0 otherwise."""
    return (np.asarray(original) > np.asarray(variant)) + 0.5 * (np.asarray(original) == np.asarray(variant))


def roc_auc(original: Sequence[float], variant: Sequence[float]) -> float | None:
    """ROC AUC of the scores separating originals (positive) from variants, ties counting half.

    The Mann–Whitney U of the originals over ``n_original × n_variant`` (equal to scikit-learn's
    ``roc_auc_score``); None when either side is empty.
    """
    a, b = np.asarray(original, dtype=float), np.asarray(variant, dtype=float)
    if a.size == 0 or b.size == 0:
        return None
    from scipy import stats as scipy_stats  # imported where used (~0.6 s at start-up)

    ranks = scipy_stats.rankdata(np.concatenate([a, b]))
    u = ranks[: a.size].sum() - a.size * (a.size + 1) / 2
    return float(u / (a.size * b.size))


def mean_estimate(values: np.ndarray, seed: int, n_resamples: int) -> Estimate:
    """Mean with its 95% bootstrap CI (BCa, :func:`bootstrap_ci`)."""
    if values.size == 0:
        return Estimate(value=None, ci_low=None, ci_high=None)
    low, high = bootstrap_ci(values, np.mean, seed=seed, n_resamples=n_resamples)
    finite = [x if np.isfinite(x) else None for x in (low, high)]
    return Estimate(value=float(np.mean(values)), ci_low=finite[0], ci_high=finite[1])
