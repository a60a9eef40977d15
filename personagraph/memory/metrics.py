"""Retrieval metrics at k, as MADial-Bench defines them (reported ×100).

- MRR@k: 1/rank of the first relevant item in the top k (0 if none).
- MAP@k: average precision over the top k divided by ``min(|relevant|, k)``.
- Recall@k: relevant items in the top k / ``|relevant|``.  Precision@k: relevant items in the top k / k.
- nDCG@k, two variants, always labelled:
  * ``nDCG`` (standard): ideal DCG puts ``min(|relevant|, k)`` relevant items on top;
  * ``nDCG-MADial``: ideal DCG is the DCG of the *retrieved* top-k relevance list sorted (the paper's code),
    so it ignores relevant items that were not retrieved and is never below the standard one.

Relevance is binary; a ranking with repeated ids counts each id once (first position).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from pydantic import BaseModel

METRICS = ("MAP", "MRR", "nDCG-MADial", "nDCG", "Recall", "Precision")
DEFAULT_KS = (1, 3, 5, 10)


def _dedup(ranked: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(ranked))


def reciprocal_rank(relevant: Iterable[str], ranked: Sequence[str], k: int) -> float:
    """1/rank of the first relevant id in the top k, else 0."""
    rel = set(relevant)
    for i, item in enumerate(_dedup(ranked)[:k]):
        if item in rel:
            return 1.0 / (i + 1)
    return 0.0


def average_precision(relevant: Iterable[str], ranked: Sequence[str], k: int) -> float:
    """AP@k: sum of precision at each relevant hit in the top k, divided by ``min(|relevant|, k)``."""
    rel = set(relevant)
    if not rel:
        return 0.0
    hits, total = 0, 0.0
    for i, item in enumerate(_dedup(ranked)[:k]):
        if item in rel:
            hits += 1
            total += hits / (i + 1)
    return total / min(len(rel), k)


def recall_at(relevant: Iterable[str], ranked: Sequence[str], k: int) -> float:
    """Share of the relevant ids found in the top k."""
    rel = set(relevant)
    return len(rel & set(_dedup(ranked)[:k])) / len(rel) if rel else 0.0


def precision_at(relevant: Iterable[str], ranked: Sequence[str], k: int) -> float:
    """Relevant ids in the top k, divided by k (even when fewer than k were retrieved)."""
    rel = set(relevant)
    return len(rel & set(_dedup(ranked)[:k])) / k


def _dcg(gains: Sequence[int]) -> float:
    return sum(g / math.log2(i + 2) for i, g in enumerate(gains))


def ndcg_standard(relevant: Iterable[str], ranked: Sequence[str], k: int) -> float:
    """Standard nDCG@k: the ideal ranking has ``min(|relevant|, k)`` relevant ids on top."""
    rel = set(relevant)
    if not rel:
        return 0.0
    gains = [1 if item in rel else 0 for item in _dedup(ranked)[:k]]
    ideal = _dcg([1] * min(len(rel), k))
    return _dcg(gains) / ideal


def ndcg_madial(relevant: Iterable[str], ranked: Sequence[str], k: int) -> float:
    """MADial's nDCG@k: the ideal is the retrieved top-k relevance list sorted; 0 when nothing was hit."""
    rel = set(relevant)
    gains = [1 if item in rel else 0 for item in _dedup(ranked)[:k]]
    ideal = _dcg(sorted(gains, reverse=True))
    return _dcg(gains) / ideal if ideal else 0.0


_FUNCS = {
    "MAP": average_precision,
    "MRR": reciprocal_rank,
    "nDCG-MADial": ndcg_madial,
    "nDCG": ndcg_standard,
    "Recall": recall_at,
    "Precision": precision_at,
}


class RetrievalScores(BaseModel):
    """Mean metrics ×100: ``values[metric][k]``, over ``queries`` queries."""

    queries: int
    ks: list[int]
    values: dict[str, dict[int, float]]

    def get(self, metric: str, k: int) -> float:
        return self.values[metric][k]


def evaluate_rankings(
    rankings: Sequence[tuple[Iterable[str], Sequence[str]]],
    ks: Sequence[int] = DEFAULT_KS,
) -> RetrievalScores:
    """Averages every metric at every k over ``(relevant_ids, ranked_ids)`` pairs, ×100."""
    pairs = [(set(map(str, rel)), [str(x) for x in ranked]) for rel, ranked in rankings]
    values: dict[str, dict[int, float]] = {}
    for name, func in _FUNCS.items():
        values[name] = {
            k: (100.0 * sum(func(rel, ranked, k) for rel, ranked in pairs) / len(pairs)) if pairs else 0.0
            for k in ks
        }
    return RetrievalScores(queries=len(pairs), ks=list(ks), values=values)
