"""Diversity: Dist-1 and Dist-2 over whitespace tokens, per response (averaged) and corpus-level.

Dist-n of a response = number of distinct n-grams / number of n-grams, tokens being ``text.split()``
(case and punctuation kept). A response with no n-gram (fewer than n tokens) has Dist-n 0.0, as in
PersoBench. Corpus-level Dist-n pools the n-grams of all responses before dividing.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from personagraph.metrics.text import tokens


def ngrams(text: str, n: int) -> list[tuple[str, ...]]:
    """The n-grams of a text's whitespace tokens, in order (with repeats)."""
    words = tokens(text)
    return [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]


def distinct_n(text: str, n: int) -> float:
    """Dist-n of one response: distinct n-grams / n-grams (0.0 when it has no n-gram)."""
    grams = ngrams(text, n)
    return len(set(grams)) / len(grams) if grams else 0.0


def corpus_distinct_n(texts: Sequence[str], n: int) -> float:
    """Corpus-level Dist-n: distinct n-grams over all texts / all n-grams over all texts."""
    grams = [gram for text in texts for gram in ngrams(text, n)]
    return len(set(grams)) / len(grams) if grams else 0.0


class Diversity(BaseModel):
    """Dist-1/2 of a set of responses.

    Attributes:
        n: number of responses.
        dist1: mean of the per-response Dist-1.
        dist2: mean of the per-response Dist-2.
        corpus_dist1: Dist-1 of all responses pooled.
        corpus_dist2: Dist-2 of all responses pooled.
    """

    n: int
    dist1: float | None
    dist2: float | None
    corpus_dist1: float | None
    corpus_dist2: float | None


def diversity(texts: Sequence[str]) -> Diversity:
    """Per-response (averaged) and corpus-level Dist-1 and Dist-2; None values for no texts."""
    if not texts:
        return Diversity(n=0, dist1=None, dist2=None, corpus_dist1=None, corpus_dist2=None)
    return Diversity(
        n=len(texts),
        dist1=sum(distinct_n(text, 1) for text in texts) / len(texts),
        dist2=sum(distinct_n(text, 2) for text in texts) / len(texts),
        corpus_dist1=corpus_distinct_n(texts, 1),
        corpus_dist2=corpus_distinct_n(texts, 2),
    )
