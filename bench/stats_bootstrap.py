"""Milliseconds per bootstrap confidence interval, for the statistics of summaries and meta-eval.

Times (CPU, best of ``--repeat`` runs; single thread advised: ``OPENBLAS_NUM_THREADS=1``) each interval
the evaluation summary and the judge meta-evaluation compute, at n = 50 and 500 observations and
B = 1000 and 2000 resamples:

* ``mean BCa``: :func:`~personagraph.judges.stats.bootstrap_ci` of the mean (every task score);
* ``persona 5x``: the PersonaScore CI, five tasks of n items each, resampled within each task;
* ``spearman``, ``kendall``, ``qw kappa``, ``mae``: one paired CI of ``agreement_report``;
* ``agreement``: the whole ``agreement_report`` (four point estimates and CIs).

    .venv/bin/python bench/stats_bootstrap.py [--sizes 50,500] [--resamples 1000,2000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._harness import machine  # noqa: E402
from personagraph.judges import scoring, stats  # noqa: E402


def best_ms(fn: Callable[[], object], repeat: int) -> float:
    """Best CPU time of ``repeat`` calls, in milliseconds (best, not mean: noise only adds)."""
    times = []
    for _ in range(repeat):
        started = time.process_time()
        fn()
        times.append(time.process_time() - started)
    return 1000 * min(times)


def cases(n: int, b: int) -> dict[str, Callable[[], object]]:
    """The intervals to time, on data shaped like real scores (judge 1..5 against human 1..5)."""
    rng = np.random.default_rng(n)
    human = rng.integers(1, 6, size=n).astype(float)
    judge = np.clip(human + rng.normal(0, 0.9, size=n), 1, 5)
    tasks = {f"task{k}": list(rng.integers(1, 6, size=n).astype(float)) for k in range(5)}
    if hasattr(stats, "spearman"):  # vectorised: the statistics agreement_report bootstraps
        paired = {
            "spearman": stats._spearman_statistic(judge, human),
            "kendall": stats._kendall_statistic(judge, human),
            "qw kappa": stats._gather(
                (judge, human),
                lambda x, y, axis=-1: stats.quadratic_weighted_kappa(x, y, (1, 5), axis),
                paired=True,
            ),
            "mae": stats._gather((judge, human), stats.mean_absolute_error, paired=True),
        }
    else:  # before: scipy.stats.bootstrap calling the statistic once per resample
        paired = {"spearman": stats._spearman, "kendall": stats._kendall}
    found: dict[str, Callable[[], object]] = {
        "mean BCa": lambda: stats.bootstrap_ci(human, n_resamples=b),
        "persona 5x": lambda: scoring._persona_score_ci(tasks, 0) if b == 2000 else None,
        "agreement": lambda: stats.agreement_report(judge, human, (1, 5), n_resamples=b),
    }
    for name, fn in paired.items():
        if hasattr(stats, "spearman"):
            found[name] = lambda fn=fn: stats._estimate(
                judge, human, fn, confidence=0.95, n_resamples=b, seed=0
            )
        else:
            found[name] = lambda fn=fn: stats.paired_bootstrap_ci(judge, human, fn, n_resamples=b)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="50,500")
    parser.add_argument("--resamples", default="1000,2000")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    resamples = [int(s) for s in args.resamples.split(",")]
    names = list(cases(sizes[0], resamples[0]))
    print(machine())
    print(f"{'n':>5} {'B':>5} " + " ".join(f"{name:>11}" for name in names) + "   (ms per CI)")
    for n in sizes:
        for b in resamples:
            found = cases(n, b)
            for fn in found.values():  # warm-up: imports, caches
                fn()
            row = []
            for name in names:
                if name == "persona 5x" and b != 2000:  # the PersonaScore CI always uses B = 2000
                    row.append(f"{'-':>11}")
                else:
                    row.append(f"{best_ms(found[name], args.repeat):>11.2f}")
            print(f"{n:>5} {b:>5} " + " ".join(row))


if __name__ == "__main__":
    main()
