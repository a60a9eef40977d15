"""ROUGE, METEOR and BERTScore on cases computed by hand."""

from __future__ import annotations

import pytest

from personagraph.errors import PersonagraphError
from personagraph.metrics import fluency
from personagraph.metrics.fluency import BertScore, load_bertscore, meteor, rouge


def test_rouge_by_hand() -> None:
    scores = rouge("the cat sat", "the cat sat on the mat")
    # ROUGE-1: P = 3/3, R = 3/6 → F = 2/3; ROUGE-2: P = 2/2, R = 2/5 → F = 4/7; ROUGE-L: LCS 3 → 2/3
    assert scores.rouge1 == pytest.approx(2 / 3)
    assert scores.rouge2 == pytest.approx(4 / 7)
    assert scores.rougeL == pytest.approx(2 / 3)
    assert rouge("dogs", "cats").rouge1 == 0.0


def test_rouge_stemming_is_opt_in() -> None:
    assert rouge("cats running", "cat run").rouge1 == 0.0
    assert rouge("cats running", "cat run", use_stemmer=True).rouge1 == pytest.approx(1.0)


def test_meteor_by_hand() -> None:
    # 6 matches in one chunk: Fmean = 1, penalty = 0.5 * (1/6)^3 → 1 - 1/432
    assert meteor("the cat sat on the mat", "the cat sat on the mat") == pytest.approx(1 - 0.5 / 216)
    assert meteor("zebra", "the cat sat") == 0.0


def test_meteor_uses_wordnet_synonyms() -> None:
    # "sofa" and "couch" share a WordNet synset, so METEOR matches them
    assert meteor("a sofa", "a couch") > meteor("a table", "a couch")


def test_missing_wordnet_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from nltk.corpus import wordnet

    def missing() -> None:
        raise LookupError("Resource wordnet not found")

    fluency.ensure_wordnet.cache_clear()
    monkeypatch.setattr(wordnet, "ensure_loaded", missing)
    with pytest.raises(PersonagraphError, match="install_wordnet.sh"):
        fluency.ensure_wordnet()
    fluency.ensure_wordnet.cache_clear()


def test_bertscore_packaged_minilm() -> None:
    scorer = load_bertscore()
    assert "all-MiniLM-L6-v2 (packaged)" in scorer.label and "layer 6" in scorer.label
    same, partial = scorer.score(
        ["the cat sat on the mat", "the cat"], ["the cat sat on the mat", "the cat sat on the mat"]
    )
    assert (same.p, same.r, same.f1) == pytest.approx((1.0, 1.0, 1.0), abs=1e-4)
    # a candidate that is part of the reference is precise but does not recall everything
    assert partial.p > partial.r
    assert partial.f1 == pytest.approx(2 * partial.p * partial.r / (partial.p + partial.r), abs=1e-4)


def test_bertscore_refuses_empty_texts_and_mismatched_lengths() -> None:
    scorer = load_bertscore()
    with pytest.raises(ValueError):
        scorer.score([""], ["x"])
    with pytest.raises(ValueError):
        scorer.score(["x"], [])


def test_bertscore_unknown_model_needs_a_layer() -> None:
    with pytest.raises(PersonagraphError, match="layer"):
        BertScore("/nonexistent/model").score(["a"], ["b"])
