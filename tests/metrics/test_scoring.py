"""Scoring a set of responses: per-item numbers, failures at worst values, means, input checks."""

from __future__ import annotations

import pytest

from personagraph.errors import PersonagraphError
from personagraph.metrics.nli import NLI_ENV, load_nli
from personagraph.metrics.scoring import (
    WORST,
    ScoreConfig,
    ScoreItem,
    metric_keys,
    parse_metrics,
    score_items,
)
from personagraph.metrics.text import persona_sentences

MNLI = {0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"}


def item(response: str | None, reference: str = "the cat sat on the mat", persona=("i have a cat.",), n=1):
    return ScoreItem(response=response, reference=reference, persona=list(persona), where=f"f.jsonl line {n}")


def test_parse_metrics() -> None:
    assert parse_metrics("dist, rouge") == ["rouge", "dist"]
    assert parse_metrics(["bertscore", "persona_coverage", "rougeL"]) == ["rouge", "bertscore", "coverage"]
    assert parse_metrics("all")[-1] == "coverage"
    with pytest.raises(PersonagraphError, match="unknown metric 'bleu'"):
        parse_metrics("rouge,bleu")
    with pytest.raises(PersonagraphError):
        parse_metrics(" , ")
    assert metric_keys(["rouge", "dist"]) == ["rouge1", "rouge2", "rougeL", "dist1", "dist2"]


def test_rows_means_and_failures() -> None:
    items = [item("the cat sat", n=1), item("", n=2), item("a b a b", reference="a b", n=3), item(None, n=4)]
    report = score_items(items, ScoreConfig(metrics=["rouge", "dist"]))
    assert report.keys == ["rouge1", "rouge2", "rougeL", "dist1", "dist2"]
    assert report.failed == [False, True, False, True]
    assert (report.n, report.failures, report.failure_ratio) == (4, 2, 0.5)
    assert report.rows[0]["rouge1"] == pytest.approx(2 / 3)
    assert report.rows[1] == {key: WORST[key] for key in report.keys}
    assert report.rows[2]["dist1"] == pytest.approx(0.5)
    # means leave failures out ...
    assert report.means["dist1"] == pytest.approx((1.0 + 0.5) / 2)
    assert report.corpus["corpus_dist1"] == pytest.approx(5 / 7)  # "the cat sat" + "a b a b": 3 + 2 distinct of 7
    # ... unless asked to average them in as worst values
    worst = score_items(items, ScoreConfig(metrics=["dist"], failures_as_worst=True))
    assert worst.means["dist1"] == pytest.approx((1.0 + 0.0 + 0.5 + 0.0) / 4)


def test_all_failures_give_no_means() -> None:
    report = score_items([item("  ")], ScoreConfig(metrics=["rouge", "dist"]))
    assert report.means["rouge1"] is None and report.failure_ratio == 1.0


def test_missing_fields_name_the_item() -> None:
    with pytest.raises(PersonagraphError, match=r"f.jsonl line 7: metric 'rouge' needs a non-empty 'reference'"):
        score_items([item("x", reference="", n=7)], ScoreConfig(metrics=["rouge"]))
    with pytest.raises(PersonagraphError, match=r"line 2: metric 'coverage' needs a non-empty 'persona'"):
        score_items([item("x", persona=(), n=2)], ScoreConfig(metrics=["coverage"]))
    # dist needs neither
    assert score_items([item("x", reference="", persona=())], ScoreConfig(metrics=["dist"])).n == 1


def test_nli_metrics_need_a_configured_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(NLI_ENV, raising=False)
    with pytest.raises(PersonagraphError, match="no NLI model configured"):
        score_items([item("x")], ScoreConfig(metrics=["c_score"]))


def test_nli_metrics_with_a_tiny_model(tiny_nli) -> None:
    path = tiny_nli(MNLI, 2)  # always "entailment"
    report = score_items([item("i like cats"), item("")], ScoreConfig(metrics=["c_score", "ue_score"], nli_model=path))
    assert report.rows[0] == {"c_score": 1.0, "ue_score": 2.0}
    assert report.rows[1] == {"c_score": -1.0, "ue_score": 0.0}
    assert report.models["nli"] == f"nli: {path}"
    load_nli.cache_clear()


def test_models_are_named_in_the_report() -> None:
    report = score_items([item("the cat")], ScoreConfig(metrics=["bertscore", "coverage"]))
    assert "all-MiniLM-L6-v2 (packaged), layer 6" in report.models["bertscore"]
    assert "all-MiniLM-L6-v2" in report.models["persona_coverage"]
    assert 0.0 < report.rows[0]["bertscore_f1"] <= 1.0


def test_from_record_checks_types() -> None:
    good = ScoreItem.from_record({"response": "hi", "persona": "i am tall. i am old.", "extra": 1}, "f line 1")
    assert good.persona == ["i am tall.", "i am old."]
    with pytest.raises(PersonagraphError, match="f line 2: missing field 'response'"):
        ScoreItem.from_record({"reference": "x"}, "f line 2")
    with pytest.raises(PersonagraphError, match="'reference' must be a string"):
        ScoreItem.from_record({"response": "x", "reference": 3}, "f line 3")
    with pytest.raises(PersonagraphError, match="'persona' must be"):
        ScoreItem.from_record({"response": "x", "persona": [1]}, "f line 4")


@pytest.mark.parametrize(
    ("persona", "expected"),
    [
        (["a.", " b "], ["a.", "b"]),
        ("i like tea. i have a cat! who am i?", ["i like tea.", "i have a cat!", "who am i?"]),
        ("line one\nline two", ["line one", "line two"]),
        ('["i am tall.", "i am old."]', ["i am tall.", "i am old."]),
        ("[User 1 persona]: ['i hate fish.' 'i like to paint.']", ["i hate fish.", "i like to paint."]),
        (None, []),
    ],
)
def test_persona_sentences(persona, expected) -> None:
    assert persona_sentences(persona) == expected
