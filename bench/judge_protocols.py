"""Judge protocols against people: ``meta-eval --benchmark`` once per protocol, side by side (ρ per subset).

Each protocol is one ``personagraph.meta_evaluate(benchmark=…, judge_protocol=…)`` run in its own folder
under ``--out`` (resumable: calls are cached there), so these figures and a user's ``meta-eval`` come from
one code path. Printed: a row per benchmark subset, a column per protocol (Spearman ρ with its 95% CI;
pairwise accuracy for pairs), the best trivial baseline and the published reference judge beside; then the
machine, the load, each protocol's paired difference to the best protocol on the same items, whether it is
the best or within the CI of the best anywhere, and a last line naming the best protocol per subset.

    .venv/bin/python bench/judge_protocols.py --judge openai:qwen2.5-coder-1.5b \\
        --serve-embedded qwen2.5-coder-1.5b --protocols score,facts,checklist,rationale,evidence \\
        --benchmark usr-personachat,persona-swap --sample 20 \\
        --benchmark-dir ../shared/benchmarks/judge-dev/raw

Last line: ``best <judge> <subset>=<protocol>:<ρ> …``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from bench._harness import cpu, load_average, serve_embedded  # noqa: E402
from personagraph import meta_evaluate  # noqa: E402
from personagraph.judges.meta_eval import EXPECTED_SUFFIX, ITEM_KIND, RECORD_KIND, MetaItem  # noqa: E402
from personagraph.judges.stats import (  # noqa: E402
    Estimate,
    mean_estimate,
    pair_credit,
    spearman,
    spearman_difference,
)
from personagraph.store import RunStore  # noqa: E402


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


def item_scores(run_dir: Path, judge: str) -> dict[str, dict[str, tuple[float, float, str]]]:
    """Per subset, per item key: (the judge's score, the people's mean, the item's pair), from a run's store;
    the probability-weighted score where the verdict has one."""
    store = RunStore(run_dir, readonly=True)
    try:
        verdicts = {v["item_key"]: v for v in store.records(RECORD_KIND) if v["judge"] == judge}
        found: dict[str, dict[str, tuple[float, float, str]]] = {}
        for record in store.records(ITEM_KIND):
            item = MetaItem.model_validate(record)
            verdict = verdicts.get(item.key)
            if verdict is None or verdict["status"] != "ok":
                continue
            score = verdict["expected_score"] if verdict["expected_score"] is not None else verdict["score"]
            found.setdefault(item.section, {})[item.key] = (float(score), item.human_mean, item.pair)
        return found
    finally:
        store.close()


def against_best(scores: dict[str, dict[str, tuple[float, float, str]]], seed: int) -> dict[str, Estimate]:
    """Each protocol's figure minus the best protocol's on the items every protocol scored (paired bootstrap):
    ρ for graded subsets, the share of pairs ordered right for pairs. The best's own row is 0."""
    keys = sorted(set.intersection(*(set(by_key) for by_key in scores.values())))
    items = next(iter(scores.values()))  # the people's mean and the pair of each key: the same in every run
    human = [items[k][1] for k in keys]
    if any(items[k][2] for k in keys):
        pairs: dict[str, list[str]] = {}
        for k in keys:
            pairs.setdefault(items[k][2], []).append(k)
        whole = [sorted(ks, key=lambda k: -items[k][1]) for ks in pairs.values() if len(ks) == 2]
        credit = {p: pair_credit(np.array([by_key[h][0] for h, _ in whole]), np.array([by_key[low][0]
                                 for _, low in whole])) for p, by_key in scores.items()}
        best = max(credit, key=lambda p: credit[p].mean())
        return {p: mean_estimate(c - credit[best], seed, 2000) for p, c in credit.items()}
    values = {p: [by_key[k][0] for k in keys] for p, by_key in scores.items()}
    best = max(values, key=lambda p: spearman(np.array(values[p]), np.array(human)))
    return {p: spearman_difference(v, values[best], human, seed=seed) for p, v in values.items()}


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
    parser.add_argument("--serve-embedded", default=None, metavar="NAME",
                        help="serve the embedded model NAME with llama-server and judge through it "
                             "(an openai: --judge: the stand-in for an API judge)")
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--out", type=Path, default=Path("runs/judge-protocols"))
    args = parser.parse_args()
    start_load = load_average()
    if args.serve_embedded:
        args.base_url = serve_embedded(args.serve_embedded)
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
    print("\nagainst the best protocol on the same items (paired bootstrap; ρ, or pairs ordered right), and "
          "whether each protocol is the best or within the CI of the best there:")
    earns: dict[str, list[str]] = {p: [] for p in protocols}
    for section in first["criteria"]:
        scores = {p: item_scores(args.out / p, args.judge).get(section, {}) for p in protocols}
        differences = against_best(scores, args.seed)
        cells = []
        for p in protocols:
            d = differences[p]
            if d.value is not None and (d.value == 0 or (d.ci_high is not None and d.ci_high >= 0)):
                earns[p].append(section)
            text = "—" if d.value is None else f"{d.value:+.3f} [{d.ci_low:+.2f}, {d.ci_high:+.2f}]"
            cells.append(f"{p} {text}")
        print(f"{section}: " + " · ".join(cells))
    for p in protocols:
        print(f"protocol {p}: " + (f"best or within the CI of the best on {', '.join(earns[p])}" if earns[p]
                          else "below the best on every subset"))
    print(f"machine: {cpu()}; load {start_load} → {load_average()}")
    print(f"best {args.judge} " + " ".join(best))


if __name__ == "__main__":
    main()
