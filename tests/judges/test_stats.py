"""Tests for personagraph.judges.stats against scipy, scikit-learn and krippendorff directly."""

from __future__ import annotations

import json
import math
import warnings

import krippendorff
import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import cohen_kappa_score

from personagraph.judges import stats as pg_stats
from personagraph.judges.stats import (
    AgreementReport,
    Stats,
    agreement_report,
    bootstrap_ci,
    describe,
    independent_bootstrap_ci,
    krippendorff_alpha,
    length_correlation,
    mean_absolute_error,
    mean_difference,
    mean_of_means,
    paired_bootstrap_ci,
    quadratic_weighted_kappa,
    spearman,
)


@pytest.fixture
def normal_sample() -> np.ndarray:
    return np.random.default_rng(42).normal(loc=3.0, scale=1.0, size=200)


@pytest.fixture
def judged_items() -> tuple[np.ndarray, np.ndarray]:
    """Human integer scores on 1..5 and a noisy, partly out-of-scale judge."""
    rng = np.random.default_rng(7)
    human = rng.integers(1, 6, size=60).astype(float)
    judge = human + rng.normal(0, 0.8, size=60)
    judge[0] = 6.3  # out of scale: must be clipped to 5 for kappa
    return judge, human


# --- bootstrap_ci -------------------------------------------------------------------------------


def test_bootstrap_ci_matches_scipy(normal_sample: np.ndarray) -> None:
    low, high = bootstrap_ci(normal_sample, seed=3)
    expected = stats.bootstrap(
        (normal_sample,), np.mean, n_resamples=2000, method="BCa", rng=np.random.default_rng(3)
    ).confidence_interval
    assert (low, high) == pytest.approx((expected.low, expected.high))


def test_bootstrap_ci_contains_mean_and_has_normal_width(normal_sample: np.ndarray) -> None:
    low, high = bootstrap_ci(normal_sample)
    mean = normal_sample.mean()
    assert low < mean < high
    half_width = 1.96 * normal_sample.std(ddof=1) / math.sqrt(normal_sample.size)
    assert (high - low) / 2 == pytest.approx(half_width, rel=0.15)


def test_bootstrap_ci_is_repeatable_and_seeded(normal_sample: np.ndarray) -> None:
    assert bootstrap_ci(normal_sample, seed=1) == bootstrap_ci(normal_sample, seed=1)
    assert bootstrap_ci(normal_sample, seed=1) != bootstrap_ci(normal_sample, seed=2)


def test_bootstrap_ci_other_statistic_and_method(normal_sample: np.ndarray) -> None:
    low, high = bootstrap_ci(normal_sample, np.median, method="percentile", confidence=0.9)
    assert low < float(np.median(normal_sample)) < high
    wide_low, wide_high = bootstrap_ci(normal_sample, np.median, method="percentile", confidence=0.99)
    assert wide_low <= low and high <= wide_high


def test_bootstrap_ci_statistic_without_axis_argument(normal_sample: np.ndarray) -> None:
    low, high = bootstrap_ci(normal_sample, lambda x: float(np.max(x) - np.min(x)), n_resamples=300)
    assert 0 < low <= high <= np.ptp(normal_sample)


@pytest.mark.parametrize("values", [[], [4.0]])
def test_bootstrap_ci_too_few_values_is_nan(values: list[float]) -> None:
    low, high = bootstrap_ci(values)
    assert math.isnan(low) and math.isnan(high)


def test_bootstrap_ci_constant_data_is_zero_width() -> None:
    assert bootstrap_ci([3.0] * 10) == (3.0, 3.0)
    assert bootstrap_ci([2.0, 2.0], np.median, method="percentile") == (2.0, 2.0)


def test_bootstrap_ci_nearly_constant_data_stays_finite() -> None:
    low, high = bootstrap_ci([1.0] * 19 + [2.0])
    assert math.isfinite(low) and math.isfinite(high)
    assert 1.0 <= low <= 1.05 <= high <= 2.0


def test_bootstrap_ci_width_shrinks_with_n() -> None:
    rng = np.random.default_rng(11)
    widths = []
    for n in (20, 80, 320, 1280):
        low, high = bootstrap_ci(rng.normal(size=n), n_resamples=1000)
        widths.append(high - low)
    assert widths == sorted(widths, reverse=True)
    assert widths[0] / widths[-1] == pytest.approx(8.0, rel=0.35)  # ~ sqrt(1280 / 20)


@pytest.mark.parametrize("method", ["BCa", "percentile", "basic"])
def test_bootstrap_ci_every_method_matches_scipy(normal_sample: np.ndarray, method: str) -> None:
    low, high = bootstrap_ci(normal_sample, np.median, method=method, n_resamples=500, seed=4)
    expected = stats.bootstrap(
        (normal_sample,), np.median, n_resamples=500, method=method, rng=np.random.default_rng(4)
    ).confidence_interval
    assert (low, high) == pytest.approx((expected.low, expected.high))


def test_bootstrap_ci_unknown_method_is_an_error(normal_sample: np.ndarray) -> None:
    with pytest.raises(ValueError, match="method"):
        bootstrap_ci(normal_sample, method="studentized")  # type: ignore[arg-type]


def test_bootstrap_ci_vectorised_and_looped_statistic_agree(normal_sample: np.ndarray) -> None:
    """A statistic with ``axis`` sees all resamples at once, one without is called per resample: same CI."""
    vectorised = bootstrap_ci(normal_sample, np.mean, n_resamples=400, seed=8)
    looped = bootstrap_ci(normal_sample, lambda x: float(np.mean(x)), n_resamples=400, seed=8)
    assert vectorised == pytest.approx(looped, rel=1e-12)


@pytest.mark.parametrize("scale", [1, 2, 4, 3])  # integer scores, halves, quarters; thirds take the long way
@pytest.mark.parametrize("n", [2, 3, 40, 1500])
def test_the_mean_s_leave_one_out_values_are_those_np_mean_gives(n: int, scale: int) -> None:
    """BCa's jackknife of the mean, computed from the sum where every sum is exact: the same interval to the
    bit as np.mean on every leave-one-out sample."""
    rng = np.random.default_rng(n + scale)
    sample = rng.integers(1 * scale, 5 * scale + 1, size=n) / scale
    sample[0] = sample[1] + 1 / scale  # not constant
    def by_rows(x: np.ndarray, axis: int = -1) -> np.ndarray:  # np.mean, but not np.mean itself
        return np.mean(x, axis=axis)

    assert bootstrap_ci(sample, np.mean, n_resamples=300, seed=n) == bootstrap_ci(
        sample, by_rows, n_resamples=300, seed=n)
    assert (pg_stats._mean_jackknife(sample) is None) == (scale == 3)


def test_bootstrap_ci_batches_do_not_change_the_interval(
    normal_sample: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = bootstrap_ci(normal_sample, n_resamples=700, seed=6)
    monkeypatch.setattr(pg_stats, "_BATCH_ELEMENTS", 3 * normal_sample.size + 17)  # 3 resamples a batch
    assert bootstrap_ci(normal_sample, n_resamples=700, seed=6) == whole


# --- paired_bootstrap_ci ------------------------------------------------------------------------


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
    return float(stats.spearmanr(x, y).statistic)


def test_paired_bootstrap_ci_matches_scipy_paired(judged_items: tuple[np.ndarray, np.ndarray]) -> None:
    judge, human = judged_items
    low, high = paired_bootstrap_ci(judge, human, _spearman, n_resamples=500, seed=5)
    expected = stats.bootstrap(
        (judge, human),
        _spearman,
        paired=True,
        vectorized=False,
        n_resamples=500,
        rng=np.random.default_rng(5),
    ).confidence_interval
    assert (low, high) == pytest.approx((expected.low, expected.high))
    assert low < _spearman(judge, human) < high <= 1.0


def test_paired_bootstrap_ci_resamples_pairs_not_marginals() -> None:
    x = np.arange(30, dtype=float)
    # Perfectly monotone pairs: any resample of *pairs* has Spearman 1 (or is undefined).
    assert paired_bootstrap_ci(x, 2 * x + 1, _spearman, n_resamples=300) == pytest.approx((1.0, 1.0))


def test_paired_bootstrap_ci_ignores_undefined_resamples() -> None:
    # With 4 pairs many resamples are constant in one coordinate, where Spearman is NaN.
    low, high = paired_bootstrap_ci([1, 2, 3, 4], [1, 1, 2, 2], _spearman, n_resamples=500)
    assert math.isfinite(low) and math.isfinite(high)
    assert -1.0 <= low <= high <= 1.0


def test_paired_bootstrap_ci_degenerate_inputs() -> None:
    assert all(math.isnan(v) for v in paired_bootstrap_ci([1.0], [2.0], _spearman))
    assert all(math.isnan(v) for v in paired_bootstrap_ci([2.0] * 5, [3.0] * 5, _spearman))

    def mean_difference(a: np.ndarray, b: np.ndarray) -> float:
        return float(np.mean(a - b))

    assert paired_bootstrap_ci([2.0] * 5, [3.0] * 5, mean_difference) == (-1.0, -1.0)
    with pytest.raises(ValueError, match="length"):
        paired_bootstrap_ci([1.0, 2.0], [1.0], _spearman)


def test_paired_bootstrap_ci_vectorised_spearman_matches_scipy(
    judged_items: tuple[np.ndarray, np.ndarray],
) -> None:
    judge, human = judged_items
    assert paired_bootstrap_ci(judge, human, spearman, n_resamples=500, seed=5) == pytest.approx(
        paired_bootstrap_ci(judge, human, _spearman, n_resamples=500, seed=5)
    )


# --- independent_bootstrap_ci -------------------------------------------------------------------


def _strata() -> list[np.ndarray]:
    """Five tasks of different sizes and spreads, like per-task item scores."""
    rng = np.random.default_rng(21)
    return [
        np.clip(np.rint(rng.normal(mu, sd, size=n)), 1, 5)
        for mu, sd, n in ((4.2, 0.6, 12), (3.1, 1.2, 40), (2.5, 0.9, 7), (3.8, 1.0, 25), (4.6, 0.4, 18))
    ]


def _slow_stratified_ci(strata: list[np.ndarray], n_resamples: int, seed: int) -> tuple[float, float]:
    """Reference: a Python loop over resamples, drawing each stratum's items with replacement."""
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(n_resamples):
        values.append(np.mean([s[rng.integers(0, s.size, size=s.size)].mean() for s in strata]))
    low, high = np.percentile(values, [2.5, 97.5])
    return float(low), float(high)


def test_stratified_ci_agrees_with_a_slow_reference() -> None:
    strata = _strata()
    low, high = independent_bootstrap_ci(strata, mean_of_means, n_resamples=4000, seed=1, method="percentile")
    ref_low, ref_high = _slow_stratified_ci(strata, 4000, seed=99)  # other draws: Monte Carlo tolerance
    point = float(np.mean([s.mean() for s in strata]))
    assert low < point < high
    # Standard error of the mean of task means, resampling within tasks (the plug-in variance):
    se = math.sqrt(sum(s.var() / s.size for s in strata)) / len(strata)
    assert (high - low) / 2 == pytest.approx(1.96 * se, rel=0.1)
    assert low == pytest.approx(ref_low, abs=0.2 * se) and high == pytest.approx(ref_high, abs=0.2 * se)


def test_stratified_ci_keeps_every_stratum_whole() -> None:
    """Within-stratum resampling: a constant stratum never moves, whatever the others do."""
    strata = [np.full(10, 5.0), np.array([1.0, 2.0, 3.0, 4.0])]
    low, high = independent_bootstrap_ci(strata, mean_of_means, n_resamples=1000, method="percentile")
    assert (5 + 1) / 2 <= low < high <= (5 + 4) / 2


def test_independent_bootstrap_ci_matches_scipy_multi_sample() -> None:
    strata = _strata()
    for statistic, samples in ((mean_of_means, strata), (mean_difference, strata[:2])):
        for method in ("BCa", "percentile"):
            low, high = independent_bootstrap_ci(samples, statistic, n_resamples=600, seed=2, method=method)
            expected = stats.bootstrap(
                tuple(samples), statistic, n_resamples=600, method=method, rng=np.random.default_rng(2)
            ).confidence_interval
            assert (low, high) == pytest.approx((expected.low, expected.high))


def test_independent_bootstrap_ci_degenerate_and_repeatable() -> None:
    assert all(math.isnan(v) for v in independent_bootstrap_ci([], mean_of_means))
    assert all(math.isnan(v) for v in independent_bootstrap_ci([[1.0, 2.0], [3.0]], mean_of_means))
    assert independent_bootstrap_ci([[2.0, 2.0], [4.0] * 3], mean_of_means) == (3.0, 3.0)
    strata = _strata()
    first = independent_bootstrap_ci(strata, mean_of_means, seed=7)
    assert independent_bootstrap_ci(strata, mean_of_means, seed=7) == first
    assert independent_bootstrap_ci(strata, mean_of_means, seed=8) != first


# --- vectorised statistics ----------------------------------------------------------------------


def _resampled_rows(n: int, rows: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, n, size=(rows, n))


def test_vectorised_statistics_equal_the_libraries_row_by_row() -> None:
    """On resamples of tied, small-n data (constant rows included), every vectorised statistic equals
    scipy or scikit-learn applied to each row."""
    rng = np.random.default_rng(3)
    human = rng.integers(1, 6, size=8).astype(float)
    judge = np.clip(human + rng.normal(0, 1.2, size=8), 0.5, 5.5)
    judge[2] = judge[5]  # a tie within the raw judge scores
    idx = np.vstack([_resampled_rows(8, 400, seed=1), np.zeros((1, 8), dtype=int)])  # + a constant resample
    x, y = judge[idx], human[idx]
    kendall = pg_stats._kendall_statistic(judge, human)((idx,))
    fast_spearman = pg_stats._spearman_statistic(judge, human)((idx,))
    with np.errstate(divide="ignore", invalid="ignore"):
        kappa = quadratic_weighted_kappa(x, y, (1, 5))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for r in range(idx.shape[0]):
            rho = stats.spearmanr(x[r], y[r]).statistic
            tau = stats.kendalltau(x[r], y[r]).statistic
            a, b = np.clip(np.rint(x[r]), 1, 5).astype(int), y[r].astype(int)
            expected_kappa = cohen_kappa_score(a, b, labels=[1, 2, 3, 4, 5], weights="quadratic")
            np.testing.assert_allclose(spearman(x[r], y[r]), rho, atol=1e-12, equal_nan=True)
            np.testing.assert_allclose(fast_spearman[r], rho, atol=1e-12, equal_nan=True)
            np.testing.assert_allclose(kendall[r], tau, atol=1e-12, equal_nan=True)
            np.testing.assert_allclose(kappa[r], expected_kappa, atol=1e-12, equal_nan=True)
    assert np.isnan(fast_spearman[-1]) and np.isnan(kendall[-1])
    np.testing.assert_allclose(spearman(x, y), fast_spearman, atol=1e-12, equal_nan=True)
    np.testing.assert_allclose(mean_absolute_error(x, y), np.abs(x - y).mean(axis=1))


# --- describe -----------------------------------------------------------------------------------


def test_describe_matches_numpy(normal_sample: np.ndarray) -> None:
    summary = describe(normal_sample)
    assert summary.n == 200
    assert summary.mean == pytest.approx(normal_sample.mean())
    assert summary.std == pytest.approx(normal_sample.std(ddof=1))
    assert (summary.ci_low, summary.ci_high) == pytest.approx(bootstrap_ci(normal_sample))
    assert summary.ci_low < summary.mean < summary.ci_high


def test_describe_small_samples() -> None:
    assert describe([]) == Stats(n=0, mean=None, std=None, ci_low=None, ci_high=None)
    assert describe([4.0]) == Stats(n=1, mean=4.0, std=None, ci_low=None, ci_high=None)
    assert describe([5, 5, 5]) == Stats(n=3, mean=5.0, std=0.0, ci_low=5.0, ci_high=5.0)


def test_describe_round_trips_as_json() -> None:
    summary = describe([1, 2, 3, 4, 5])
    assert Stats.model_validate(json.loads(summary.model_dump_json())) == summary


# --- krippendorff_alpha -------------------------------------------------------------------------

# Krippendorff's (2011) worked example: 3 coders x 15 units with missing values.
_KRIPPENDORFF_EXAMPLE: list[list[float | None]] = [
    [None, None, None, None, None, 3, 4, 1, 2, 1, 1, 3, 3, None, 3],
    [1, None, 2, 1, 3, 3, 4, 3, None, None, None, None, None, None, None],
    [None, None, 2, 1, 3, 4, 4, None, 2, 1, 1, 3, 3, None, 4],
]


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval", "ratio"])
def test_krippendorff_alpha_matches_package(level: str) -> None:
    matrix = np.array([[np.nan if v is None else v for v in row] for row in _KRIPPENDORFF_EXAMPLE])
    expected = krippendorff.alpha(reliability_data=matrix, level_of_measurement=level)
    assert krippendorff_alpha(_KRIPPENDORFF_EXAMPLE, level=level) == pytest.approx(expected)


def test_krippendorff_alpha_published_values() -> None:
    assert krippendorff_alpha(_KRIPPENDORFF_EXAMPLE, level="nominal") == pytest.approx(0.691, abs=1e-3)
    assert krippendorff_alpha(_KRIPPENDORFF_EXAMPLE, level="interval") == pytest.approx(0.811, abs=1e-3)


def test_krippendorff_alpha_perfect_and_opposite_agreement() -> None:
    assert krippendorff_alpha([[1, 2, 3, 4, 5], [1, 2, 3, 4, 5]]) == pytest.approx(1.0)
    assert krippendorff_alpha([[1, 2, 3, 4, 5], [5, 4, 3, 2, 1]]) < 0


def test_krippendorff_alpha_not_computable_is_none() -> None:
    assert krippendorff_alpha([]) is None
    assert krippendorff_alpha([[1, 2, 3]]) is None  # one rater
    assert krippendorff_alpha([[3, 3, 3], [3, 3, 3]]) is None  # a single value in the domain
    assert krippendorff_alpha([[1, None, None], [None, 2, None]]) is None  # no item rated twice


def test_krippendorff_alpha_ragged_rows_rejected() -> None:
    with pytest.raises(ValueError, match="per item"):
        krippendorff_alpha([[1, 2, 3], [1, 2]])


# --- agreement_report ---------------------------------------------------------------------------


def test_agreement_report_matches_libraries(judged_items: tuple[np.ndarray, np.ndarray]) -> None:
    judge, human = judged_items
    report = agreement_report(judge, human, (1, 5), n_resamples=500)

    rounded = np.clip(np.rint(judge), 1, 5).astype(int)
    assert report.n == 60 and report.scale == (1, 5)
    assert report.spearman.value == pytest.approx(stats.spearmanr(judge, human).statistic)
    assert report.kendall.value == pytest.approx(stats.kendalltau(judge, human).statistic)
    assert report.quadratic_kappa.value == pytest.approx(
        cohen_kappa_score(rounded, human.astype(int), weights="quadratic", labels=[1, 2, 3, 4, 5])
    )
    assert report.mae.value == pytest.approx(np.mean(np.abs(judge - human)))
    for estimate in (report.spearman, report.kendall, report.quadratic_kappa, report.mae):
        assert estimate.ci_low < estimate.value < estimate.ci_high
    assert 0.5 < report.spearman.value < 1.0
    assert 0.5 < report.quadratic_kappa.value < 1.0


def test_agreement_report_perfect_and_reversed() -> None:
    human = [1, 2, 3, 4, 5, 1, 2, 3, 4, 5]
    perfect = agreement_report(human, human, (1, 5), n_resamples=200)
    assert perfect.spearman.value == pytest.approx(1.0)
    assert perfect.kendall.value == pytest.approx(1.0)
    assert perfect.quadratic_kappa.value == pytest.approx(1.0)
    assert perfect.mae.value == 0.0
    assert perfect.mae.ci_low == perfect.mae.ci_high == 0.0

    reversed_ = agreement_report([6 - h for h in human], human, (1, 5), n_resamples=200)
    assert reversed_.spearman.value == pytest.approx(-1.0)
    assert reversed_.quadratic_kappa.value == pytest.approx(-1.0)


def test_agreement_report_constant_judge_is_undefined_correlation() -> None:
    report = agreement_report([3.0] * 6, [1, 2, 3, 4, 5, 3], (1, 5), n_resamples=200)
    assert report.spearman.value is None and report.spearman.ci_low is None
    assert report.kendall.value is None
    assert report.mae.value == pytest.approx(np.mean(np.abs(3 - np.array([1, 2, 3, 4, 5, 3]))))
    assert report.quadratic_kappa.value == pytest.approx(0.0)
    assert AgreementReport.model_validate_json(report.model_dump_json()) == report


def test_agreement_report_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="judge scores"):
        agreement_report([1.0, 2.0], [1], (1, 5))
    with pytest.raises(ValueError, match="within the scale"):
        agreement_report([1.0, 2.0], [1, 7], (1, 5))
    with pytest.raises(ValueError, match="low < high"):
        agreement_report([1.0], [1], (5, 1))


def test_agreement_report_empty_and_single_item() -> None:
    empty = agreement_report([], [], (1, 5))
    assert empty.n == 0 and empty.spearman.value is None and empty.mae.value is None
    single = agreement_report([4.2], [4], (1, 5))
    assert single.mae.value == pytest.approx(0.2)
    assert single.mae.ci_low is None and single.mae.ci_high is None


# --- length_correlation -------------------------------------------------------------------------


def test_length_correlation_detects_verbosity_bias() -> None:
    texts = [" ".join(["word"] * n) for n in (5, 40, 12, 80, 25, 60, 3, 33)]
    lengths = [len(t.split()) for t in texts]
    scores = [1 + n / 20 for n in lengths]
    result = length_correlation(scores, texts, n_resamples=300)
    assert result.value == pytest.approx(1.0)

    rng = np.random.default_rng(0)
    noisy = [float(s + rng.normal(0, 1.5)) for s in scores]
    noisy_result = length_correlation(noisy, texts, n_resamples=300)
    assert noisy_result.value == pytest.approx(stats.spearmanr(noisy, lengths).statistic)
    assert noisy_result.ci_low <= noisy_result.value <= noisy_result.ci_high


def test_length_correlation_degenerate() -> None:
    assert length_correlation([1.0, 2.0], ["same length", "same length"]).value is None
    with pytest.raises(ValueError, match="texts"):
        length_correlation([1.0], [])
