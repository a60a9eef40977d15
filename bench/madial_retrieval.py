"""MADial-Bench memory recall with the paper's protocol, every method beside the published anchors.

    .venv/bin/python bench/madial_retrieval.py ../shared/benchmarks/madial-en [--json OUT] [--full]

Protocol (as in the paper's code): one query per dialogue (160), the dialogue text before the first
test turn; the pool is the user's own memories (a Chroma bank with per-user filtering); metrics @1/3/5/10
×100. The ``dense-paper`` row is the paper's setup with all-MiniLM-L6-v2: memory text = Python ``str()`` of
the memory dict, query = the whole prefix. Every other row embeds the memory's event text only.

Fusion weights (``bm25_weight``, ``emotion_weight``) are not tuned on the full test set: the script picks
them on one user's dialogues and scores them on the other user's (both ways) and prints that
cross-user estimate; the fixed defaults of :class:`RecallSettings` were chosen the same way.
The last line printed is ``best MRR@10 <value> <method>``.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import itertools
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from personagraph.embeddings import encode
from personagraph.memory.bank import MemoryBank
from personagraph.memory.madial import check_references, load_dialogues, load_memories
from personagraph.memory.metrics import RetrievalScores, evaluate_rankings
from personagraph.memory.recall import Candidates, Recaller, RecallSettings, fuse

DIALOGUES = "MADial-Bench-en-dialogue.json"
MEMORIES = "MADial-Bench-en-memory.json"
ANCHORS = "published_retrieval_en.csv"
KS = (1, 3, 5, 10)

METHOD_ROWS: list[tuple[str, dict]] = [
    ("dense-prefix", {"method": "dense", "view": "prefix"}),
    ("dense-user", {"method": "dense", "view": "user"}),
    ("dense-last-user", {"method": "dense", "view": "last_user"}),
    ("dense-all-turns", {"method": "dense", "view": "all"}),
    ("dense-turns-lse", {"method": "dense", "view": "turns_lse"}),
    ("dense-turns-max", {"method": "dense", "view": "turns_max"}),
    ("bm25", {"method": "bm25"}),
    ("hybrid-rrf", {"method": "hybrid"}),
    ("proactive-boost", {"method": "proactive", "proactive": "boost"}),
    ("proactive-filter", {"method": "proactive", "proactive": "filter"}),
    ("multiview", {"method": "multiview"}),
    ("multiview+bm25", {"method": "fusion", "emotion_weight": 0.0}),
    ("fusion", {"method": "fusion"}),
]


def ranked_ids(cands: Candidates, settings: RecallSettings, k: int = 10) -> list[str]:
    scores = fuse(cands, settings)
    return [cands.memories[i].id for i in np.argsort(-scores, kind="stable")[:k]]


async def reranked(cands: list[Candidates], dialogues: list, spec: str) -> list[tuple[list[str], list[str]]]:
    """Fusion's top 10 per query reordered by an LLM (memory_rerank prompt), the rest after."""
    from personagraph.memory.recall import Recalled
    from personagraph.memory.rerank import rerank
    from personagraph.models import ModelClient

    client = ModelClient.create(spec, "memory_reranker", temperature=0.0, max_tokens=128)
    settings = RecallSettings(method="fusion")
    out = []
    for c, d in zip(cands, dialogues, strict=True):
        scores = fuse(c, settings)
        order = np.argsort(-scores, kind="stable")[:10]
        found = [Recalled(memory=c.memories[i], score=float(scores[i])) for i in order]
        found = await rerank(client, d.context(), found, 10)
        out.append((d.relevant_ids, [r.memory.id for r in found]))
    return out


def mrr10(rankings: list[tuple[list[str], list[str]]]) -> float:
    return evaluate_rankings(rankings, (10,)).get("MRR", 10)


def load_anchors(path: Path) -> dict[str, dict[str, dict[int, float]]]:
    anchors: dict[str, dict[str, dict[int, float]]] = {}
    if not path.is_file():
        return anchors
    with path.open(encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            metric = "nDCG-MADial" if row["metric"] == "nDCG" else row["metric"]
            anchors.setdefault(row["model"], {})[metric] = {k: float(row[f"at{k}"]) for k in KS}
    return anchors


COLUMNS = [
    ("MAP", 10),
    ("MRR", 1),
    ("MRR", 3),
    ("MRR", 5),
    ("MRR", 10),
    ("nDCG-MADial", 10),
    ("nDCG", 10),
    ("Recall", 10),
    ("Precision", 10),
]


def header() -> str:
    cols = " ".join(f"{(m if m != 'Precision' else 'P') + '@' + str(k):>14}" for m, k in COLUMNS)
    return f"{'method':<44}{cols}"


def line(name: str, values: dict[str, dict[int, float]]) -> str:
    cells = []
    for metric, k in COLUMNS:
        v = values.get(metric, {}).get(k)
        cells.append(f"{v:>14.2f}" if v is not None else f"{'n/a':>14}")
    return f"{name:<44}{''.join(' ' + c for c in cells)}"


def full_table(name: str, scores: RetrievalScores) -> str:
    rows = [f"  {name}: " + "  ".join(f"@{k}" for k in scores.ks)]
    for metric, per_k in scores.values.items():
        rows.append(f"    {metric:<12}" + " ".join(f"{per_k[k]:6.2f}" for k in scores.ks))
    return "\n".join(rows)


def cross_user_weights(
    cands: list[Candidates],
    dialogues: list,
    grid_bm25: list[float],
    grid_emotion: list[float],
) -> tuple[float, list[str]]:
    """Pick (bm25_weight, emotion_weight) on one user's dialogues, score on the other's; both directions."""
    users = sorted({d.user_id for d in dialogues})
    by_user = {u: [i for i, d in enumerate(dialogues) if d.user_id == u] for u in users}
    table: dict[tuple[float, float], dict[str, float]] = {}
    for a, e in itertools.product(grid_bm25, grid_emotion):
        settings = RecallSettings(method="fusion", bm25_weight=a, emotion_weight=e)
        table[(a, e)] = {
            u: mrr10([(dialogues[i].relevant_ids, ranked_ids(cands[i], settings)) for i in idx])
            for u, idx in by_user.items()
        }
    notes, weighted = [], 0.0
    for tune in users:
        best = max(table, key=lambda w: (table[w][tune], -w[0], -w[1]))
        for test in users:
            if test == tune:
                continue
            notes.append(
                f"tuned on user {tune} -> bm25_weight={best[0]}, emotion_weight={best[1]}; "
                f"MRR@10 on user {test}: {table[best][test]:.2f}"
            )
            weighted += table[best][test] * len(by_user[test])
    return weighted / len(dialogues), notes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data_dir", type=Path)
    parser.add_argument("--json", type=Path, help="write every method's full metrics here")
    parser.add_argument("--full", action="store_true", help="also print every metric at every k per method")
    parser.add_argument(
        "--rerank",
        metavar="SPEC",
        help="add a row: fusion's top 10 reranked by this LLM "
        "(e.g. local:qwen2.5-coder-1.5b; one call per query)",
    )
    args = parser.parse_args()

    dialogues = load_dialogues(args.data_dir / DIALOGUES)
    memories = load_memories(args.data_dir / MEMORIES)
    check_references(dialogues, memories, str(args.data_dir / DIALOGUES))
    anchors = load_anchors(args.data_dir / ANCHORS)

    started = time.perf_counter()
    results: dict[str, RetrievalScores] = {}
    with tempfile.TemporaryDirectory(prefix="madial-bench-") as tmp:
        paper_bank = MemoryBank(Path(tmp) / "paper", document_format="madial")
        paper_bank.add(memories)
        paper = Recaller(paper_bank, RecallSettings(method="dense", view="prefix"))
        rankings = []
        for d in dialogues:
            cands = paper.candidates(d.user_id, d.context(), needed={"dense.prefix"})
            rankings.append((d.relevant_ids, ranked_ids(cands, paper.settings)))
        results["dense-paper (str(memory), prefix)"] = evaluate_rankings(rankings, KS)

        # embed every query text in one batch first (the encoder caches them for the recall calls)
        warm = []
        for d in dialogues:
            ctx = d.context()
            warm += list(ctx.views().values()) + ctx.user_turns() + ctx.texts()
        encode(warm)
        bank = MemoryBank(Path(tmp) / "event", document_format="event")
        bank.add(memories)
        recaller = Recaller(bank, RecallSettings(method="fusion"))
        all_cands = [recaller.candidates(d.user_id, d.context()) for d in dialogues]
        for name, overrides in METHOD_ROWS:
            settings = RecallSettings(**overrides)
            if settings.method == "bm25":  # BM25 ranks the whole pool; here candidates == pool already
                assert all(
                    len(c.memories) == bank.count(d.user_id)
                    for c, d in zip(all_cands, dialogues, strict=True)
                )
            rankings = [
                (d.relevant_ids, ranked_ids(c, settings)) for c, d in zip(all_cands, dialogues, strict=True)
            ]
            results[name] = evaluate_rankings(rankings, KS)
        if args.rerank:
            rankings = asyncio.run(reranked(all_cands, dialogues, args.rerank))
            results[f"fusion+rerank({args.rerank})"] = evaluate_rankings(rankings, KS)
        cv, notes = cross_user_weights(
            all_cands,
            dialogues,
            [0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4],
            [0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3],
        )
    elapsed = time.perf_counter() - started

    print(
        f"MADial-Bench EN memory recall: {len(dialogues)} queries, {len(memories)} memories, "
        f"all-MiniLM-L6-v2 on CPU, {elapsed:.0f} s"
    )
    print("nDCG-MADial = the paper's nDCG (ideal from the retrieved list sorted); nDCG = standard nDCG.")
    print(header())
    for model, values in anchors.items():
        print(line(f"[published] {model}", values))
    for name, scores in results.items():
        print(line(name, scores.values))
    defaults = RecallSettings()
    print(
        f"fusion defaults: bm25_weight={defaults.bm25_weight}, emotion_weight={defaults.emotion_weight} "
        "(chosen by the cross-user split below, not on all queries)"
    )
    for note in notes:
        print("  " + note)
    print(f"  cross-user estimate of fusion MRR@10 (weights picked on the other user): {cv:.2f}")
    if args.full:
        for name, scores in results.items():
            print(full_table(name, scores))
    if args.json:
        args.json.write_text(json.dumps({n: s.model_dump() for n, s in results.items()}, indent=1))
    best = max(results, key=lambda n: results[n].get("MRR", 10))
    print(f"best MRR@10 {results[best].get('MRR', 10):.2f} {best}")


if __name__ == "__main__":
    main()
