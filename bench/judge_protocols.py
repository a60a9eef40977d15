"""Judge protocols against people: ``meta-eval --benchmark`` once per protocol, side by side (ρ per subset).

Each protocol is one ``personagraph.meta_evaluate(benchmark=…, judge_protocol=…)`` run in its own folder
under ``--out`` (resumable: calls are cached there), so these figures and a user's ``meta-eval`` come from
one code path. Printed: a row per benchmark subset, a column per protocol (Spearman ρ with its 95% CI;
pairwise accuracy for pairs), the best trivial baseline and the published reference judge beside; then the
machine, the load, and a last line naming the best protocol per subset.

    .venv/bin/python bench/judge_protocols.py --judge local:qwen2.5-coder-1.5b --protocols evidence,checklist \\
        --benchmark persona --benchmark-dir ../shared/benchmarks/judge-dev/raw --sample 20

Last line: ``best <judge> <subset>=<protocol>:<ρ> …``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._harness import cpu, load_average  # noqa: E402
from personagraph import meta_evaluate  # noqa: E402
from personagraph.judges.meta_eval import EXPECTED_SUFFIX  # noqa: E402


def figure(result: dict[str, Any], judge: str) -> tuple[float | None, str]:
    """The judge's headline figure on one subset (pairwise accuracy for pairs, else ρ) and its text."""
    name = judge + EXPECTED_SUFFIX if judge + EXPECTED_SUFFIX in result["judges"] else judge
    if "pairwise" in result:
        estimate = result["pairwise"][name]["pairwise_accuracy"]
    else:
        estimate = result["judges"][name]["spearman"]
    value, low, high = estimate["value"], estimate["ci_low"], estimate["ci_high"]
    if value is None:
        return None, "—"
    return value, f"{value:+.3f} [{low:+.2f}, {high:+.2f}]" if low is not None else f"{value:+.3f}"


def baseline_text(result: dict[str, Any]) -> str:
    best = result.get("best_baseline")
    if best is None:
        return "—"
    if "pairwise" in result:
        return f"{best} {result['pairwise'][f'baseline: {best}']['pairwise_accuracy']['value']:.3f}"
    return f"{best} {result['baselines'][best]['spearman']['value']:+.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--judge", default="local:qwen2.5-coder-1.5b")
    parser.add_argument("--protocols", default="evidence", help="comma-separated protocol names")
    parser.add_argument("--benchmark", default="persona")
    parser.add_argument("--benchmark-dir", default=None)
    parser.add_argument("--sample", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--base-url", default=None)
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--out", type=Path, default=Path("runs/judge-protocols"))
    args = parser.parse_args()
    start_load = load_average()
    protocols = [p.strip() for p in args.protocols.split(",") if p.strip()]
    results: dict[str, dict[str, Any]] = {}
    for protocol in protocols:
        began = time.monotonic()
        summary = meta_evaluate(
            benchmark=args.benchmark,
            judges=[args.judge],
            judge_protocol=protocol,
            sample=args.sample,
            benchmark_dir=args.benchmark_dir,
            seed=args.seed,
            concurrency=args.concurrency,
            base_url=args.base_url,
            timeout=args.timeout,
            run_dir=args.out / protocol,
        )
        results[protocol] = summary.model_dump(mode="json")
        print(
            f"{protocol}: {summary.llm_calls} calls, {results[protocol]['failed_verdicts']} failed verdicts, "
            f"{time.monotonic() - began:.0f} s",
            flush=True,
        )
    first = results[protocols[0]]
    print(f"\n{args.judge}: ρ with people [95% CI] (pairs: pairwise accuracy); sample {args.sample or 'all'}")
    print(" | ".join(["subset", "n", *protocols, "best baseline", "reference"]))
    best: list[str] = []
    for section in first["criteria"]:
        cells = {p: figure(results[p]["results"][section], args.judge) for p in protocols}
        result = first["results"][section]
        reference = (result.get("reference") or {}).get("spearman", {}).get("value")
        print(
            " | ".join(
                [
                    section,
                    str(first["criteria"][section]["n_records"]),
                    *(cells[p][1] for p in protocols),
                    baseline_text(result),
                    "—" if reference is None else f"{reference:+.3f}",
                ]
            )
        )
        scored = [(value, p) for p, (value, _) in cells.items() if value is not None]
        if scored:
            value, protocol = max(scored)
            best.append(f"{section}={protocol}:{value:.3f}")
    print(f"machine: {cpu()}; load {start_load} → {load_average()}")
    print(f"best {args.judge} " + " ".join(best))


if __name__ == "__main__":
    main()
