"""Retrieval metrics on hand-computed cases, both nDCG variants."""

from __future__ import annotations

import math

import pytest

from personagraph.memory.metrics import (
    average_precision,
    evaluate_rankings,
    ndcg_madial,
    ndcg_standard,
    precision_at,
    recall_at,
    reciprocal_rank,
)

REL = ["a", "b", "c"]
RANKED = ["x", "a", "y", "b", "z"]  # hits at ranks 2 and 4


def test_reciprocal_rank() -> None:
    assert reciprocal_rank(REL, RANKED, 1) == 0.0
    assert reciprocal_rank(REL, RANKED, 3) == pytest.approx(0.5)
    assert reciprocal_rank(REL, ["a"], 1) == 1.0


def test_average_precision_divides_by_min_relevant_k() -> None:
    # k=5: precisions at hits 1/2 and 2/4 -> (0.5 + 0.5) / min(3, 5)
    assert average_precision(REL, RANKED, 5) == pytest.approx(1.0 / 3)
    # k=3: one hit (1/2) -> 0.5 / min(3, 3)
    assert average_precision(REL, RANKED, 3) == pytest.approx(0.5 / 3)
    # k=1 with a hit on top: 1 / min(3, 1) = 1
    assert average_precision(REL, ["a", "x"], 1) == 1.0


def test_recall_and_precision() -> None:
    assert recall_at(REL, RANKED, 5) == pytest.approx(2 / 3)
    assert precision_at(REL, RANKED, 5) == pytest.approx(2 / 5)
    assert precision_at(REL, ["a"], 10) == pytest.approx(1 / 10)  # divides by k, not by retrieved


def test_ndcg_standard_ideal_has_min_rel_k_hits_on_top() -> None:
    dcg = 1 / math.log2(3) + 1 / math.log2(5)
    ideal = 1 + 1 / math.log2(3) + 1 / math.log2(4)
    assert ndcg_standard(REL, RANKED, 5) == pytest.approx(dcg / ideal)
    # k=3: one hit at rank 2, ideal three hits
    assert ndcg_standard(REL, RANKED, 3) == pytest.approx((1 / math.log2(3)) / ideal)


def test_ndcg_madial_ideal_is_retrieved_list_sorted() -> None:
    dcg = 1 / math.log2(3) + 1 / math.log2(5)
    ideal = 1 + 1 / math.log2(3)  # the two retrieved hits moved to the top
    assert ndcg_madial(REL, RANKED, 5) == pytest.approx(dcg / ideal)
    # one hit anywhere in the top k: MADial's variant is 1/log2(r+1) / 1
    assert ndcg_madial(REL, RANKED, 3) == pytest.approx(1 / math.log2(3))
    assert ndcg_madial(REL, ["x", "y"], 2) == 0.0
    assert ndcg_madial(REL, RANKED, 5) >= ndcg_standard(REL, RANKED, 5)


def test_duplicates_count_once() -> None:
    assert precision_at(["a"], ["a", "a", "a"], 3) == pytest.approx(1 / 3)
    assert average_precision(["a", "b"], ["a", "a", "b"], 3) == pytest.approx((1 + 1) / 2)


def test_evaluate_rankings_averages_times_100() -> None:
    scores = evaluate_rankings([(["a"], ["a", "x"]), (["b"], ["x", "b"])], ks=(1, 2))
    assert scores.get("MRR", 1) == pytest.approx(50.0)
    assert scores.get("MRR", 2) == pytest.approx(75.0)
    assert scores.get("Precision", 2) == pytest.approx(50.0)
    assert set(scores.values) == {"MAP", "MRR", "nDCG-MADial", "nDCG", "Recall", "Precision"}
