"""Memory bank at scale: query latency and HNSW recall@10 against exact search.

    .venv/bin/python bench/memory_scale.py [--sizes 10000,100000] [--queries 200] [--users 1]

For each size N, a fresh local bank (``MemoryBank`` in a temp folder, the same code path as production)
gets N memories with pre-computed synthetic embeddings — unit vectors drawn around random cluster
centres, like sentence embeddings of related events (``--spread`` sets how tight) — split over
``--users`` users. Queries are new draws from the same mixture, each searched through
``MemoryBank.query`` (user filter, top 10, metadata + distances + embeddings), one at a time, timed
end-to-end. Recall@10 compares HNSW's ids with exact brute-force cosine top-10 of the same user.
Targets: p50 <= 10 ms at 100k, recall >= 0.99.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._harness import machine  # noqa: E402
from personagraph.memory.bank import DEFAULT_HNSW, Memory, MemoryBank  # noqa: E402


def synthetic(n: int, dim: int, clusters: int, spread: float, rng: np.random.Generator) -> np.ndarray:
    """``n`` unit vectors around ``clusters`` random centres; ``spread`` is the noise scale."""
    centres = rng.normal(size=(clusters, dim)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    labels = rng.integers(0, clusters, size=n)
    noise = rng.normal(scale=spread / np.sqrt(dim), size=(n, dim)).astype(np.float32)
    vectors = centres[labels] + noise
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def run_size(n: int, args: argparse.Namespace, rng: np.random.Generator) -> dict[str, float]:
    data = synthetic(n + args.queries, args.dim, args.clusters, args.spread, rng)
    vectors, queries = data[:n], data[n:]
    users = [str(i % args.users) for i in range(n)]
    memories = [Memory(id=str(i), user_id=users[i], event=f"synthetic event {i}") for i in range(n)]
    hnsw = {**DEFAULT_HNSW}
    for key in ("ef_search", "ef_construction", "max_neighbors"):
        if getattr(args, key) is not None:
            hnsw[key] = getattr(args, key)
    with tempfile.TemporaryDirectory(prefix="memory-scale-") as tmp:
        bank = MemoryBank(Path(tmp) / "bank", hnsw=hnsw)
        started = time.perf_counter()
        step = 5000
        for start in range(0, n, step):
            bank.add(memories[start : start + step], embeddings=vectors[start : start + step])
        build = time.perf_counter() - started
        user_of = np.array([int(u) for u in users])
        latencies, raw_latencies, recalls = [], [], []
        for _ in range(args.warmup):
            bank.query("0", queries[:1], args.k)
        for qi, q in enumerate(queries):
            user = str(qi % args.users)
            t0 = time.perf_counter()
            hits = bank.query(user, q[None, :], args.k)[0]
            latencies.append(time.perf_counter() - t0)
            col = bank._user_collection(user, create=False)
            t0 = time.perf_counter()
            col.query(query_embeddings=q[None, :], n_results=args.k, include=["distances"])
            raw_latencies.append(time.perf_counter() - t0)
            mask = np.where(user_of == int(user))[0]
            exact = mask[np.argsort(-(vectors[mask] @ q), kind="stable")[: args.k]]
            got = {int(h.memory.id) for h in hits}
            recalls.append(len(got & set(exact.tolist())) / min(args.k, len(mask)))
    lat, raw = np.array(latencies) * 1000, np.array(raw_latencies) * 1000
    row = {
        "n": n,
        "build_s": build,
        "p50_ms": float(np.percentile(lat, 50)),
        "p95_ms": float(np.percentile(lat, 95)),
        "raw_p50_ms": float(np.percentile(raw, 50)),
        "raw_p95_ms": float(np.percentile(raw, 95)),
        "recall": float(np.mean(recalls)),
        "min_recall": float(np.min(recalls)),
        "hnsw": hnsw,
    }
    print(
        f"{row['n']:>10} {row['build_s']:>9.1f} {row['p50_ms']:>8.2f} {row['p95_ms']:>8.2f} "
        f"{row['raw_p50_ms']:>8.2f} {row['raw_p95_ms']:>8.2f} "
        f"{row['recall']:>10.4f} {row['min_recall']:>6.2f}",
        flush=True,
    )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--users", type=int, default=1, help="memories are split over this many users")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--clusters", type=int, default=500)
    parser.add_argument("--spread", type=float, default=0.8)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--ef-search", dest="ef_search", type=int)
    parser.add_argument("--ef-construction", dest="ef_construction", type=int)
    parser.add_argument("--max-neighbors", dest="max_neighbors", type=int)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    hnsw = {
        **DEFAULT_HNSW,
        **{
            k: getattr(args, k)
            for k in ("ef_search", "ef_construction", "max_neighbors")
            if getattr(args, k) is not None
        },
    }
    print(machine())
    print(
        f"memory bank scale: dim {args.dim}, {args.users} user(s), {args.queries} queries, top-{args.k}, "
        f"HNSW {hnsw}"
    )
    print(
        "p50/p95: MemoryBank.query (ids, metadata, distances, embeddings); raw: Chroma HNSW, distances only"
    )
    print(
        f"{'memories':>10} {'build s':>9} {'p50 ms':>8} {'p95 ms':>8} {'raw p50':>8} {'raw p95':>8} "
        f"{'recall@10':>10} {'min':>6}",
        flush=True,
    )
    rows = [run_size(int(s), args, rng) for s in args.sizes.split(",")]
    last = rows[-1]
    print(
        f"at {last['n']}: p50 {last['p50_ms']:.2f} ms, p95 {last['p95_ms']:.2f} ms "
        f"(raw HNSW p50 {last['raw_p50_ms']:.2f} ms), recall@10 {last['recall']:.4f}"
    )


if __name__ == "__main__":
    main()
