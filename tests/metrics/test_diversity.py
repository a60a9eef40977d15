"""Dist-1/2 exactly as defined: distinct n-grams / n-grams over whitespace tokens."""

from __future__ import annotations

import pytest

from personagraph.metrics.diversity import corpus_distinct_n, distinct_n, diversity, ngrams


def test_ngrams_are_whitespace_tokens_in_order() -> None:
    assert ngrams("a  b\ta\nb", 2) == [("a", "b"), ("b", "a"), ("a", "b")]
    assert ngrams("x", 2) == []


def test_per_response_dist_by_hand() -> None:
    # "a b a b": 4 unigrams, 2 distinct; bigrams ab, ba, ab: 3, 2 distinct
    assert distinct_n("a b a b", 1) == pytest.approx(2 / 4)
    assert distinct_n("a b a b", 2) == pytest.approx(2 / 3)
    # a response with no bigram scores 0 (PersoBench's convention)
    assert distinct_n("x", 1) == 1.0
    assert distinct_n("x", 2) == 0.0
    assert distinct_n("", 1) == 0.0


def test_tokens_keep_case_and_punctuation() -> None:
    assert distinct_n("The the", 1) == 1.0
    assert distinct_n("dog dog.", 1) == 1.0
    assert distinct_n("dog dog", 1) == 0.5


def test_corpus_level_pools_ngrams_without_crossing_responses() -> None:
    texts = ["a b a b", "x"]
    # unigrams a b a b x: 5, distinct 3; bigrams only inside responses: ab ba ab → 3, distinct 2
    assert corpus_distinct_n(texts, 1) == pytest.approx(3 / 5)
    assert corpus_distinct_n(texts, 2) == pytest.approx(2 / 3)
    # a bigram repeated across responses counts once among the distinct ones
    assert corpus_distinct_n(["a b", "a b"], 2) == pytest.approx(1 / 2)


def test_diversity_averages_per_response_and_reports_corpus() -> None:
    result = diversity(["a b a b", "x"])
    assert result.n == 2
    assert result.dist1 == pytest.approx((0.5 + 1.0) / 2)
    assert result.dist2 == pytest.approx((2 / 3 + 0.0) / 2)
    assert result.corpus_dist1 == pytest.approx(0.6)
    assert result.corpus_dist2 == pytest.approx(2 / 3)
    assert diversity([]).dist1 is None
