"""NLI loading (tiny local models), C-Score, UE-Score and persona coverage on hand-computed cases."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from personagraph.embeddings import embed
from personagraph.errors import PersonagraphError
from personagraph.metrics.nli import NLI_ENV, Entailment, NLIModel, configured_nli_model, label_order
from personagraph.metrics.personalization import c_scores, persona_coverage, ue_score, ue_scores

MNLI = {0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"}
OTHER_ORDER = {0: "entailment", 1: "neutral", 2: "contradiction"}


class RuleNLI(NLIModel):
    """An NLI stand-in with a written rule, for checking the score arithmetic."""

    def __init__(self, rule: Callable[[str, str], Entailment]) -> None:
        self.rule = rule
        self.seen: list[tuple[str, str]] = []

    def predict(self, pairs: Sequence[tuple[str, str]]) -> list[Entailment]:
        self.seen.extend(pairs)
        return [self.rule(premise, hypothesis) for premise, hypothesis in pairs]


def keyword_rule(premise: str, hypothesis: str) -> Entailment:
    if "hate" in premise and "love" in hypothesis:
        return Entailment.CONTRADICTION
    if premise.split()[-1].rstrip(".") in hypothesis:
        return Entailment.ENTAILMENT
    return Entailment.NEUTRAL


def test_label_order_comes_from_config() -> None:
    assert label_order(MNLI, "m") == [Entailment.CONTRADICTION, Entailment.NEUTRAL, Entailment.ENTAILMENT]
    assert label_order({"1": "neutral", "0": "entailment", "2": "contradiction"}, "m")[0] is Entailment.ENTAILMENT
    with pytest.raises(PersonagraphError, match="LABEL_0"):
        label_order({0: "LABEL_0", 1: "LABEL_1", 2: "LABEL_2"}, "m")
    with pytest.raises(PersonagraphError, match="three labels"):
        label_order({0: "entailment", 1: "not_entailment"}, "m")


def test_tiny_saved_model_loads_and_predicts_through_its_id2label(tiny_nli) -> None:
    # the same winning index means different outcomes under different label orders
    mnli = NLIModel(tiny_nli(MNLI, 2))
    other = NLIModel(tiny_nli(OTHER_ORDER, 2))
    pairs = [("i have a dog .", "i like dogs"), ("i hate cats", "i like cats")]
    assert mnli.predict(pairs) == [Entailment.ENTAILMENT, Entailment.ENTAILMENT]
    assert other.predict(pairs) == [Entailment.CONTRADICTION, Entailment.CONTRADICTION]
    assert c_scores(mnli, ["i like dogs"], [["i have a dog .", "i hate cats"]]) == [1.0]
    assert c_scores(other, ["i like dogs"], [["i have a dog ."]]) == [-1.0]


def test_tiny_model_batches_and_truncates(tiny_nli) -> None:
    model = NLIModel(tiny_nli(MNLI, 1), batch_size=2, max_length=8)
    pairs = [("i like dogs " * 20, "i hate cats " * 20)] * 5
    assert model.predict(pairs) == [Entailment.NEUTRAL] * 5


def test_no_nli_model_configured_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(NLI_ENV, raising=False)
    with pytest.raises(PersonagraphError, match="no NLI model configured"):
        configured_nli_model(None)
    monkeypatch.setenv(NLI_ENV, "/some/folder")
    assert configured_nli_model(None) == "/some/folder"
    assert configured_nli_model("other") == "other"


def test_unloadable_nli_model_is_a_clear_error(tmp_path) -> None:
    with pytest.raises(PersonagraphError, match="cannot load"):
        NLIModel(str(tmp_path / "missing"))


def test_c_score_is_the_mean_of_plus_one_zero_minus_one() -> None:
    nli = RuleNLI(keyword_rule)
    persona = ["i have a dog.", "i hate cats.", "i live in paris."]
    # dog → entailment +1; "hate" + "love" → contradiction −1; paris → neutral 0
    assert c_scores(nli, ["i love my dog and cats"], [persona]) == [pytest.approx(0.0)]
    assert c_scores(nli, ["my dog is in paris"], [persona]) == [pytest.approx(2 / 3)]
    assert c_scores(nli, ["i love it", "a dog"], [["i hate it"], ["i have a dog."]]) == [-1.0, 1.0]
    # each persona sentence is the premise, the response the hypothesis
    assert ("i have a dog.", "a dog") in nli.seen
    with pytest.raises(ValueError):
        c_scores(nli, ["x"], [[]])


def test_ue_score_truth_table() -> None:
    assert ue_score(True, True) == 2
    assert ue_score(True, False) == 1
    assert ue_score(False, True) == 0
    assert ue_score(False, False) == 0


def test_ue_scores_use_persona_and_reference_as_premises() -> None:
    nli = RuleNLI(lambda premise, hypothesis: Entailment.ENTAILMENT if premise.split()[-1] in hypothesis
                  else Entailment.NEUTRAL)
    responses = ["i walk my dog", "i walk my dog", "hello"]
    personas = [["i have a", "dog"], ["i have a", "dog"], ["dog"]]
    references = ["we walk", "cats", "dog"]
    # persona premise is the sentences joined: "i have a dog" (ends in dog)
    assert ue_scores(nli, responses, personas, references) == [2, 1, 0]
    assert ("i have a dog", "i walk my dog") in nli.seen and ("we walk", "i walk my dog") in nli.seen


def test_persona_coverage_is_mean_cosine_over_sentences() -> None:
    persona = ["i have a dog.", "i work as a nurse."]
    vectors = embed(["i have a dog.", *persona])
    expected = (float(vectors[0] @ vectors[1]) + float(vectors[0] @ vectors[2])) / 2
    (score,) = persona_coverage(["i have a dog."], [persona])
    assert score == pytest.approx(expected, abs=1e-5)
    assert persona_coverage(["i have a dog."], [["i have a dog."]]) == [pytest.approx(1.0, abs=1e-5)]
    related, unrelated = persona_coverage(["my puppy is cute", "the stock market fell"], [persona, persona])
    assert related > unrelated
    with pytest.raises(ValueError):
        persona_coverage(["x"], [[]])
