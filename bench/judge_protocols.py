"""Judging protocols on every judge development file, with the trivial baselines as rows beside them.

The files (``../shared/benchmarks/judge-dev`` and ``bench/rubric_dev``), each judged under its own rubric:

* ``usr``: USR PersonaChat, 150 replies of 30 dialogues rated Uses Knowledge (0/1 ×3) and Overall (1–5 ×3),
  judged on Persona Consistency: Spearman ρ with each mean rating.
* ``swap``: 100 persona-swap pairs (a reply against its own persona and an unrelated one): pairwise
  accuracy and ROC AUC. Solved by counting words: a floor, not a target.
* ``cb_bot``, ``cb_human``: CharacterBench attribute consistency (the user asks about the character; the
  user says something the reply must square with), 1–4, judged on Persona Consistency: ρ, and the ROC AUC
  of replies people scored 1 ("contradicts the profile") against those scored 4.
* ``cb_behavior``: CharacterBench behaviour consistency, 1–3, judged on Linguistic Habits: ρ.
* ``rubric_dev``: 20 answers written to be 5s under each of the five rubrics, each beside its
  hand-written contradiction: pairwise accuracy (original above contradiction, ties half) and AUC.

Beside every judge figure: the baselines of ``judges/features.py`` (length, word overlap, MiniLM
similarity), the paired bootstrap difference to the best of them on the same replies, and, on
CharacterBench, its authors' fine-tuned 7B CharacterJudge as the data's README reports it. A weighed
protocol (``evidence``) is scored as packaged; the files its model was fitted on are marked
``in-sample`` (its cross-validated and cross-source figures are ``bench/fit_evidence.py``'s).
Seconds per verdict: mean latency of the calls sent per file (cached calls not counted; ``--concurrency``
verdicts in flight on a shared machine: the load is printed). Calls are cached in ``--cache``.

    .venv/bin/python bench/judge_protocols.py                                   # every file, evidence
    .venv/bin/python bench/judge_protocols.py --files cb_bot,rubric_dev --per-file 40
    .venv/bin/python bench/judge_protocols.py --judge openai:qwen2.5-coder-1.5b \\
        --serve-embedded qwen2.5-coder-1.5b --protocols rationale --exemplars    # the API stand-in

Last line: ``best <embedded|api-stand-in> <protocol> usr_knowledge <ρ> usr_overall <ρ> cb_bot <ρ> cb_human
<ρ> cb_behavior <ρ> contradiction_auc <auc> rubric_dev_pairwise <acc> swap_pairwise <acc> s_per_verdict
<s>`` for the protocol with the highest mean ρ. Tune on these files only: held-out characters, contexts
and rows of the same sources check the final figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._harness import load_average, machine  # noqa: E402
from bench.fit_evidence import CACHE, DEV, rho_ci  # noqa: E402
from personagraph.environments import task_by_name  # noqa: E402
from personagraph.judges.features import BASELINES, Text  # noqa: E402
from personagraph.judges.features import compute as compute_features  # noqa: E402
from personagraph.judges.judge import exemplar_text, score_response, write_exemplars  # noqa: E402
from personagraph.judges.meta_eval import CriterionCatalogue, MetaItem, load_items, question_text  # noqa: E402
from personagraph.judges.protocols import PROTOCOLS, evidence_model, get_protocol  # noqa: E402
from personagraph.judges.stats import spearman, spearman_difference  # noqa: E402
from personagraph.judges.validity import roc_auc, variant_stats  # noqa: E402
from personagraph.models import ModelClient, ModelSettings  # noqa: E402
from personagraph.models.engine import engine_for  # noqa: E402
from personagraph.models.openai_http import close_sessions  # noqa: E402
from personagraph.schemas import Question  # noqa: E402
from personagraph.store import RunStore  # noqa: E402

JUDGE_MAX_TOKENS = 256
RUBRIC_DEV = Path(__file__).resolve().parent / "rubric_dev" / "items.jsonl"
GRADED = {"cb_bot": "characterbench_attribute_consistency_bot.jsonl",
          "cb_human": "characterbench_attribute_consistency_human.jsonl",
          "cb_behavior": "characterbench_behavior_consistency_human.jsonl"}
FILES = ("usr", "swap", *GRADED, "rubric_dev")
CHARACTERJUDGE = {"cb_bot": 0.69, "cb_human": 0.56, "cb_behavior": 0.11}
"""CharacterJudge's reference-free ρ on these replies, as the dev files' README gives it."""


@dataclass(frozen=True)
class Judged:
    """One thing to judge: ``key`` names the reply (pairs: ``<pair>/<side>``)."""

    source: str
    key: str
    item: MetaItem
    response: str


def load(dev: Path, files: list[str], per_file: int, seed: int) -> tuple[list[Judged], dict[str, Any]]:
    """The replies of ``files`` (a seeded subset of ``per_file`` each, stratified by human score, where
    given) and what each file is scored against."""
    catalogue = CriterionCatalogue()
    rng = random.Random(seed)
    out: list[Judged] = []
    truth: dict[str, Any] = {}

    def sample(items: list[MetaItem]) -> list[MetaItem]:
        if not per_file or per_file >= len(items):
            return items
        levels: dict[float, list[MetaItem]] = defaultdict(list)
        for item in items:
            levels[item.human_mean].append(item)
        share = per_file / len(items)
        return [i for group in levels.values() for i in rng.sample(group, max(1, round(share * len(group))))]

    if "usr" in files:
        knowledge = {i.id: i for i in load_items(dev / "usr_knowledge.jsonl", catalogue)}
        overall = {i.id: i for i in load_items(dev / "usr_overall.jsonl", catalogue)}
        items = sample([knowledge[k] for k in sorted(knowledge.keys() & overall.keys())])
        out += [Judged("usr", i.id, i, i.response) for i in items]
        truth["usr"] = {"knowledge": {i.id: i.human_mean for i in items},
                        "overall": {i.id: overall[i.id].human_mean for i in items}}
    if "swap" in files:
        pairs: dict[str, dict[str, MetaItem]] = defaultdict(dict)
        for item in load_items(dev / "persona_swap.jsonl", catalogue):
            pair, side = item.id.rsplit("-", 1)
            pairs[pair][side] = item
        chosen = sorted(p for p in pairs if {"m", "s"} <= pairs[p].keys())
        if per_file:
            chosen = sorted(rng.sample(chosen, min(per_file // 2, len(chosen))))
        out += [Judged("swap", f"{p}/{side}", pairs[p][side], pairs[p][side].response)
                for p in chosen for side in ("m", "s")]
    for name, file in GRADED.items():
        if name in files:
            items = sample(load_items(dev / file, catalogue))
            out += [Judged(name, i.id, i, i.response) for i in items]
            truth[name] = {i.id: i.human_mean for i in items}
    if "rubric_dev" in files:
        items = [i for i in load_items(RUBRIC_DEV, catalogue) if i.contradiction.strip()]
        out += [Judged("rubric_dev", f"{i.id}/{side}", i, text) for i in items
                for side, text in (("original", i.response), ("contradiction", i.contradiction))]
    return out, truth


async def judge_all(args: argparse.Namespace, judged: list[Judged], protocols: list[str]) -> list[dict]:
    """Every reply under every protocol (one protocol at a time, so latencies are each protocol's own)."""
    catalogue = CriterionCatalogue()
    store = RunStore(args.cache)
    settings = ModelSettings(base_url=args.base_url, concurrency=args.concurrency, seed=0,
                             temperature=0.0, max_tokens=JUDGE_MAX_TOKENS, timeout_s=600)
    client = ModelClient.create(args.judge, "judge", store=store, settings=settings)
    writer = ModelClient.create(args.judge, "exemplar_gen", store=store, settings=settings,
                                max_tokens=1024) if args.exemplars else None
    gate = asyncio.Semaphore(args.concurrency)
    exemplars: dict[str, asyncio.Future[str | None]] = {}
    unwritten: list[str] = []  # the writer's error for each set not written (its verdicts read the rubric)
    rows: list[dict] = []

    async def examples_for(j: Judged) -> str | None:
        """PersonaGym's exemplars for the item's persona, task and question, written once (replies of one
        context share them)."""
        if writer is None:
            return None
        task = task_by_name(catalogue.resolve(j.item.criterion).rubric.task)
        key = f"{j.item.persona}\n{task.name}\n{j.item.question}"
        if key not in exemplars:
            question = Question(id=j.item.id, persona_id=j.item.id, task=task.name,
                                text=question_text(j.item))

            async def write() -> str | None:
                written = await write_exemplars(writer, j.item.persona, task, question)
                if written.status != "ok":
                    unwritten.append(written.error or "no reason given")
                    return None
                return exemplar_text(written)

            exemplars[key] = asyncio.ensure_future(write())
        return await exemplars[key]

    async def one(protocol: str, j: Judged) -> None:
        rubric = catalogue.resolve(j.item.criterion).rubric
        async with gate:
            examples = await examples_for(j)
            started = time.perf_counter()
            scored = await score_response(client, rubric, persona=j.item.persona,
                                          question=question_text(j.item), response=j.response,
                                          examples=examples,
                                          protocol=get_protocol(protocol, args.judge))
            seconds = time.perf_counter() - started
        value = scored.expected if scored.expected is not None else scored.score
        rows.append({"protocol": protocol, "source": j.source, "key": j.key, "status": scored.status,
                     "value": value, "score": scored.score, "expected": scored.expected, "seconds": seconds,
                     "cached": scored.cached, "inputs": scored.inputs, "error": scored.error,
                     "read_exemplars": examples is not None})
        if not scored.cached:
            print(f"  {protocol:10} {j.source:11} {j.key:34} {value if value is not None else '-'!s:.5} "
                  f"{seconds:.1f}s", flush=True)

    try:
        for protocol in protocols:
            await asyncio.gather(*(one(protocol, j) for j in judged))
    finally:
        await close_sessions()
        store.close()
    if unwritten:  # a verdict without its examples is still a verdict: say how many read none, and why
        alone = sum(not r["read_exemplars"] for r in rows)
        print(f"exemplars: {len(unwritten)} of {len(exemplars)} sets not written, so {alone} of {len(rows)} "
              f"verdicts read the rubric alone; the writer's first error: {unwritten[0][:200]}", flush=True)
    return rows


def baselines(judged: list[Judged]) -> dict[tuple[str, str], dict[str, float]]:
    """(source, key) → each baseline's value."""
    texts = [Text(persona=j.item.persona, question=question_text(j.item), response=j.response)
             for j in judged]
    columns = compute_features(BASELINES, texts)
    return {(j.source, j.key): {name: columns[name][k] for name in BASELINES} for k, j in enumerate(judged)}


def _fmt(e: tuple[float, float, float]) -> str:
    return f"{e[0]:+.3f} [{e[1]:+.3f}, {e[2]:+.3f}]"


def graded_report(source: str, human: dict[str, float], scorers: dict[str, dict[str, float]],
                  seed: int) -> tuple[list[str], dict[str, float]]:
    """ρ per scorer on the replies every scorer scored, paired difference of each judge row to the best
    baseline, and (1–4 scales) the AUC of scored-1 against scored-4 replies."""
    keys = sorted(set(human).intersection(*(set(s) for s in scorers.values())))
    h = np.array([human[k] for k in keys])
    lines, figures = [], {}
    best = max(BASELINES, key=lambda b: spearman([scorers[b][k] for k in keys], h))
    extreme = [k for k in keys if human[k] in (1.0, 4.0)] if source in ("cb_bot", "cb_human") else []
    for name, values in scorers.items():
        x = np.array([values[k] for k in keys])
        rho = rho_ci(x, h, seed)
        line = f"  {name:32} ρ {_fmt(rho)}"
        if extreme:
            auc = roc_auc([values[k] for k in extreme if human[k] == 4.0],
                          [values[k] for k in extreme if human[k] == 1.0])
            line += f"  AUC 1 vs 4 {auc:.3f}"
            figures[f"{name}:auc"] = auc
        if name not in BASELINES:
            d = spearman_difference(x, np.array([scorers[best][k] for k in keys]), h, seed=seed)
            line += f"  − {best} {d.value:+.3f} [{d.ci_low:+.3f}, {d.ci_high:+.3f}]"
        lines.append(line)
        figures[name] = rho[0]
    if source in CHARACTERJUDGE:
        lines.append(f"  {'CharacterJudge (7B, the README)':32} ρ {CHARACTERJUDGE[source]:+.3f}")
    return [f"{source} ({len(keys)} replies): Spearman ρ with the human score [95% CI]", *lines], figures


def paired_report(source: str, scorers: dict[str, dict[str, float]], first: str, second: str,
                  seed: int) -> tuple[list[str], dict[str, float]]:
    """Pairwise accuracy (``first`` above ``second``, ties half) and AUC per scorer."""
    lines, figures = [f"{source}: pairwise accuracy ({first} above {second}) [95% CI], ROC AUC"], {}
    for name, values in scorers.items():
        pairs = sorted({k.rsplit("/", 1)[0] for k in values})
        both = [(values[f"{p}/{first}"], values[f"{p}/{second}"]) for p in pairs
                if f"{p}/{first}" in values and f"{p}/{second}" in values]
        if not both:
            continue
        stats = variant_stats("swap", [a for a, _ in both], [b for _, b in both], seed=seed)
        acc = stats.pairwise_accuracy
        lines.append(f"  {name:32} {acc.value:.3f} [{acc.ci_low:.3f}, {acc.ci_high:.3f}]  "
                     f"AUC {stats.auc:.3f}  ({len(both)} pairs)")
        figures[name], figures[f"{name}:auc"] = acc.value, stats.auc
    return lines, figures


def in_sample(protocol: str, rubric_task: str) -> str:
    """Which sources a weighed protocol's packaged model was fitted on (from its ``fitted_on``)."""
    if not PROTOCOLS[protocol].weighed:
        return ""
    from personagraph.judges.rubrics import load_rubric

    model = evidence_model(load_rubric(rubric_task))
    return "" if model is None else model.fitted_on


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dev", type=Path, default=DEV)
    parser.add_argument("--judge", default="local:qwen2.5-coder-1.5b")
    parser.add_argument("--base-url", default=None, help="an OpenAI-compatible server for openai: judges")
    parser.add_argument("--serve-embedded", default=None, metavar="NAME",
                        help="serve the embedded model NAME with llama-server and judge through it as an "
                             "OpenAI-compatible endpoint (an openai: --judge; the stand-in for an API judge)")
    parser.add_argument("--protocols", default="evidence")
    parser.add_argument("--files", default=",".join(FILES), help=f"comma-separated, of {', '.join(FILES)}")
    parser.add_argument("--per-file", type=int, default=0,
                        help="a seeded subset of about N replies per file, stratified by score (0: all)")
    parser.add_argument("--exemplars", action="store_true",
                        help="write PersonaGym exemplars with the judge's model for protocols that read them")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--cache", type=Path, default=CACHE, help="run store of the judge's calls")
    parser.add_argument("--out", type=Path, default=None, help="raw results (json); default: a temp file")
    args = parser.parse_args()
    protocols = [p.strip() for p in args.protocols.split(",") if p.strip()]
    files = [f.strip() for f in args.files.split(",") if f.strip()]
    unknown = [f for f in files if f not in FILES]
    if unknown:
        parser.error(f"--files {unknown[0]!r}: choose from {', '.join(FILES)}")
    for name in protocols:
        get_protocol(name, args.judge)

    print(machine(), flush=True)
    if args.serve_embedded:
        args.base_url = asyncio.run(engine_for(args.serve_embedded).base_url())
        print(f"serving local:{args.serve_embedded} at {args.base_url} for {args.judge}", flush=True)
    judged, truth = load(args.dev, files, args.per_file, args.seed)
    print(f"judge {args.judge}: {len(judged)} replies from {', '.join(files)}; protocols "
          f"{', '.join(protocols)}{' (with exemplars)' if args.exemplars else ''}", flush=True)
    base = baselines(judged)
    rows = asyncio.run(judge_all(args, judged, protocols))
    print(f"{len(rows)} verdicts, {sum(r['status'] != 'ok' for r in rows)} failed", flush=True)

    figures: dict[str, dict[str, float]] = defaultdict(dict)
    seconds: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in rows:
        if not r["cached"]:
            seconds[(r["protocol"], r["source"])].append(r["seconds"])
    for source in files:
        mine = [j for j in judged if j.source == source]
        scorers: dict[str, dict[str, float]] = {b: {j.key: base[(source, j.key)][b] for j in mine}
                                                for b in BASELINES}
        for protocol in protocols:
            ok = {r["key"]: r["value"] for r in rows if r["protocol"] == protocol and r["source"] == source
                  and r["status"] == "ok" and r["value"] is not None}
            failed = sum(r["status"] != "ok" for r in rows
                         if r["protocol"] == protocol and r["source"] == source)
            times = seconds[(protocol, source)]
            label = f"{protocol} ({np.mean(times):.1f} s/verdict)" if times else f"{protocol} (cached)"
            scorers[label + (f", {failed} failed" if failed else "")] = ok
        print()
        if source == "usr":
            for rating in ("knowledge", "overall"):
                lines, got = graded_report(f"usr {rating}", truth["usr"][rating], scorers, args.seed)
                print("\n".join(lines))
                figures[f"usr_{rating}"] = got
        elif source in GRADED:
            lines, got = graded_report(source, truth[source], scorers, args.seed)
            print("\n".join(lines))
            figures[source] = got
        else:
            first, second = ("m", "s") if source == "swap" else ("original", "contradiction")
            lines, got = paired_report(source, scorers, first, second, args.seed)
            print("\n".join(lines))
            figures[source] = got
    for protocol in protocols:
        fitted = in_sample(protocol, "persona_consistency")
        if fitted:
            print(f"\n{protocol}: the packaged Persona Consistency model was fitted on: {fitted} "
                  "(its figures on those replies are in-sample)")
    out = args.out or Path(tempfile.mkdtemp(prefix="judge-protocols-")) / "results.json"
    out.write_text(json.dumps({"judge": args.judge, "machine": machine(), "verdicts": rows}, default=str),
                   encoding="utf-8")
    print(f"\nraw results: {out}")
    print(f"load average at end {load_average()} (machine shared)")
    provider = args.judge.partition(":")[0].partition("@")[0]
    kind = {"local": "embedded", "openai": "api-stand-in"}.get(provider, provider)

    def of(protocol: str, source: str, auc: bool = False) -> float:
        return next((v for k, v in figures.get(source, {}).items()
                     if k.split(" (")[0] == protocol and k.endswith(":auc") == auc), float("nan"))

    def mean_rho(protocol: str) -> float:
        values = [of(protocol, s) for s in ("usr_knowledge", "usr_overall", *GRADED)]
        return float(np.nanmean(values)) if not all(np.isnan(values)) else float("-inf")

    best = max(protocols, key=mean_rho)
    spent = [s for (p, _), times in seconds.items() if p == best for s in times]
    aucs = [a for a in (of(best, s, auc=True) for s in ("cb_bot", "cb_human")) if not np.isnan(a)]
    contradiction = float(np.mean(aucs)) if aucs else float("nan")
    named = " ".join(f"{source} {of(best, source):.3f}"
                     for source in ("usr_knowledge", "usr_overall", "cb_bot", "cb_human", "cb_behavior"))
    print(f"best {kind} {best} {named} contradiction_auc {contradiction:.3f} rubric_dev_pairwise "
          f"{of(best, 'rubric_dev'):.3f} swap_pairwise {of(best, 'swap'):.3f} s_per_verdict "
          f"{np.mean(spent) if spent else float('nan'):.1f}")


if __name__ == "__main__":
    main()
