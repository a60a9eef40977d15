"""Behavior alignment: strategies, INSPIRED loading, BA, Cohen's κ, the classifier, the LLM labeller."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from personagraph.errors import PersonagraphError
from personagraph.metrics.behavior import (
    BehaviorConfig,
    LLMLabeller,
    StrategyClassifier,
    ba,
    behavior_alignment,
    check_label,
    cohen_kappa,
    label_schema,
    load_inspired,
    load_responses,
    strategy_names,
)
from personagraph.models import ModelClient
from personagraph.runs.base import ProgressEvent
from personagraph.runs.behavior import run as run_behavior_alignment

HEADER = "dialog_id\tutt_id\tspeaker\tturn_id\ttext\texpert_label\tsecond_label\n"
ROWS = [
    ("d1", "RECOMMENDER", "Hello how are you today?", "no_strategy", ""),
    ("d1", "SEEKER", "I'm well, thanks", "", ""),
    ("d1", "RECOMMENDER", "What kind of movies do you like?", "opinion_inquiry", ""),
    ("d1", "SEEKER", "I love superhero movies.", "", ""),
    ("d1", "SEEKER", "Marvel mostly.", "", ""),
    ("d1", "RECOMMENDER", "Me too, I love Marvel!", "similarity", ""),
    ("d1", "RECOMMENDER", "You should watch Shazam.", "encouragement", "credibility"),
    ("d2", "RECOMMENDER", "Hi there", "no_strategy", ""),
    ("d2", "SEEKER", "Hi, I want a comedy", "", ""),
    ("d2", "RECOMMENDER", "What was the last comedy you watched?", "experience_inquiry", ""),
]


def write_tsv(path: Path, rows=ROWS, header: str = HEADER) -> Path:
    lines = [header] + [f"{d}\t{i}\t{s}\t0\t{t}\t{a}\t{b}\n" for i, (d, s, t, a, b) in enumerate(rows, start=1)]
    path.write_text("".join(lines), encoding="utf-8")
    return path


def test_the_fourteen_strategies() -> None:
    names = strategy_names()
    assert len(names) == 14 and names[-1] == "no_strategy"
    assert {"acknowledgment", "credibility", "encouragement", "experience_inquiry", "offer_help", "opinion_inquiry",
            "personal_experience", "personal_opinion", "preference_confirmation", "rephrase_preference",
            "self_modeling", "similarity", "transparency"} == set(names) - {"no_strategy"}
    assert check_label(" Offer Help ", "x") == "offer_help"
    with pytest.raises(PersonagraphError, match="x row 3: label 'chitchat' is not one of the 14"):
        check_label("chitchat", "x row 3")


def test_load_inspired_groups_turns(tmp_path: Path) -> None:
    dialogues = load_inspired(write_tsv(tmp_path / "d.tsv"))
    assert [d.id for d in dialogues] == ["d1", "d2"]
    turns = dialogues[0].turns
    assert [(t.speaker, t.is_system, t.system_index) for t in turns] == [
        ("RECOMMENDER", True, 1), ("SEEKER", False, 0), ("RECOMMENDER", True, 2), ("SEEKER", False, 0),
        ("RECOMMENDER", True, 3)]
    assert turns[3].text == "I love superhero movies. Marvel mostly."
    assert turns[4].labels == [["similarity"], ["encouragement", "credibility"]]
    assert turns[4].label_set == {"similarity", "encouragement", "credibility"}
    assert turns[4].rows == [6, 7]
    assert "SEEKER: I love superhero movies. Marvel mostly." in dialogues[0].context(4)
    assert len(load_inspired(tmp_path / "d.tsv", limit=1)) == 1


def test_load_inspired_bad_inputs(tmp_path: Path) -> None:
    bad = list(ROWS)
    bad[2] = ("d1", "RECOMMENDER", "What kind of movies?", "movie_talk", "")
    with pytest.raises(PersonagraphError, match=r"bad.tsv row 3: label 'movie_talk' is not one of the 14"):
        load_inspired(write_tsv(tmp_path / "bad.tsv", bad))
    with pytest.raises(PersonagraphError, match=r"missing column expert_label"):
        load_inspired(write_tsv(tmp_path / "col.tsv", header=HEADER.replace("expert_label", "label")))
    (tmp_path / "empty.tsv").write_text("")
    with pytest.raises(PersonagraphError, match=r"empty.tsv: empty file"):
        load_inspired(tmp_path / "empty.tsv")
    (tmp_path / "header.tsv").write_text(HEADER)
    with pytest.raises(PersonagraphError, match=r"header.tsv: empty file"):
        load_inspired(tmp_path / "header.tsv")
    with pytest.raises(PersonagraphError, match=r"no row has speaker 'SYSTEM'"):
        load_inspired(write_tsv(tmp_path / "d.tsv"), system_speaker="SYSTEM")
    blank = list(ROWS)
    blank[4] = ("d1", "SEEKER", " ", "", "")
    with pytest.raises(PersonagraphError, match=r"row 5: empty 'text'"):
        load_inspired(write_tsv(tmp_path / "blank.tsv", blank))


def test_ba_by_hand() -> None:
    assert ba({"similarity"}, {"similarity", "encouragement"}) == 1
    assert ba({"credibility"}, {"similarity"}) == 0
    result = behavior_alignment([({"a"}, {"a"}), ({"b"}, {"a"}), ({"c"}, {"c", "d"}), ({"d"}, {"e"})], n_resamples=200)
    assert result.value == pytest.approx(0.5) and result.n == 4
    assert 0.0 <= result.ci_low <= 0.5 <= result.ci_high <= 1.0
    assert behavior_alignment([]).value is None


def test_cohen_kappa_by_hand() -> None:
    labeller = ["x", "x", "y", "y"]
    human = ["x", "y", "x", "y"]
    # p_o = 0.5, p_e = 0.5 → κ = 0
    assert cohen_kappa(labeller, human, n_resamples=200).value == pytest.approx(0.0)
    perfect = cohen_kappa(["a", "b", "c", "a"] * 3, ["a", "b", "c", "a"] * 3, n_resamples=200)
    assert perfect.value == pytest.approx(1.0) and perfect.ci_low == pytest.approx(1.0)
    # p_o = 3/4; marginals a: x3 y1, b: x2 y2 → p_e = (3*2 + 1*2)/16 = 1/2 → κ = (3/4 - 1/2) / (1/2) = 1/2
    half = cohen_kappa(["x", "x", "x", "y"], ["x", "x", "y", "y"], n_resamples=200)
    assert half.value == pytest.approx(0.5) and half.n == 4
    assert half.ci_low <= 0.5 <= half.ci_high
    with pytest.raises(ValueError):
        cohen_kappa(["x"], [])


def test_classifier_fits_predicts_and_round_trips(tmp_path: Path) -> None:
    texts = ["What kind of movies do you like?", "What genres do you enjoy?", "Which films do you prefer?",
             "I watched it last week with my kids.", "I saw it in the cinema years ago.",
             "I went to see it with my friends."]
    labels = ["opinion_inquiry"] * 3 + ["personal_experience"] * 3
    classifier = StrategyClassifier.fit(texts, labels)
    assert classifier.predict(["What movies do you like to watch?", "I watched that one with my wife."]) == [
        "opinion_inquiry", "personal_experience"]
    path = tmp_path / "clf.json"
    classifier.save(path)
    loaded = StrategyClassifier.load(path)
    assert loaded.predict(texts) == classifier.predict(texts)
    assert json.loads(path.read_text())["format"] == "personagraph-strategy-classifier"
    with pytest.raises(PersonagraphError, match="at least two strategies"):
        StrategyClassifier.fit(texts[:2], labels[:2])
    with pytest.raises(PersonagraphError, match="not one of the 14"):
        StrategyClassifier.fit(texts[:2], ["opinion_inquiry", "bogus"])
    (tmp_path / "junk.json").write_text("{}")
    with pytest.raises(PersonagraphError, match="not a personagraph strategy classifier"):
        StrategyClassifier.load(tmp_path / "junk.json")
    with pytest.raises(PersonagraphError, match="no such classifier file"):
        StrategyClassifier.load(tmp_path / "missing.json")


async def test_llm_labeller_gives_one_of_the_fourteen() -> None:
    schema = label_schema()
    assert schema.model_json_schema()["properties"]["strategy"]["enum"] == list(strategy_names())
    labeller = LLMLabeller(ModelClient.create("test:default", "strategy_labeller"))
    label = await labeller.label("SEEKER: hi", "What kind of movies do you like?")
    assert label in strategy_names()
    broken = LLMLabeller(ModelClient.create("test:broken", "strategy_labeller"))
    assert await broken.label("SEEKER: hi", "Hello") is None


def test_load_responses_checks_records(tmp_path: Path) -> None:
    dialogues = load_inspired(write_tsv(tmp_path / "d.tsv"))
    good = tmp_path / "r.jsonl"
    good.write_text('{"dialog_id": "d1", "turn": 2, "response": "What do you like?"}\n')
    assert load_responses(good, dialogues) == {("d1", 2): "What do you like?"}
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"dialog_id": "d1", "turn": 2, "response": "x"}\n{"dialog_id": "d2", "turn": 5, "response": "y"}\n')
    with pytest.raises(PersonagraphError, match=r"bad.jsonl line 2: dialogue 'd2' has no recommender turn 5"):
        load_responses(bad, dialogues)
    bad.write_text('{"dialog_id": "d1", "response": "x"}\n')
    with pytest.raises(PersonagraphError, match=r"line 1: missing field 'turn'"):
        load_responses(bad, dialogues)


async def test_run_with_classifier_and_responses(tmp_path: Path) -> None:
    data = write_tsv(tmp_path / "d.tsv")
    responses = tmp_path / "r.jsonl"
    responses.write_text("\n".join(json.dumps(r) for r in [
        {"dialog_id": "d1", "turn": 1, "response": "Hello!"},  # first turn: excluded
        {"dialog_id": "d1", "turn": 2, "response": "What movies do you like?"},
        {"dialog_id": "d1", "turn": 3, "response": ""},  # empty: a failure, not a zero
        {"dialog_id": "d2", "turn": 2, "response": "Which comedy did you see last?"},
    ]) + "\n")
    config = BehaviorConfig(dialogues=data, classifier=tmp_path / "clf.json", fit_classifier=data,
                            responses=responses, n_resamples=200)
    summary = await run_behavior_alignment(config, tmp_path / "run")
    assert summary.labeller.startswith("classifier:")
    assert summary.labelled_utterances == 6 and summary.kappa.n == 6  # rows 1, 3, 6, 7, 8, 10
    assert summary.responses == 3 and summary.failed_responses == 1
    assert summary.ba is not None and summary.ba.n == 2
    assert (tmp_path / "run" / "behavior_summary.json").is_file()
    assert (tmp_path / "clf.json").is_file()


async def test_run_with_llm_labeller_and_system(tmp_path: Path) -> None:
    config = BehaviorConfig(dialogues=write_tsv(tmp_path / "d.tsv"), labeller="test:default", system="test:default",
                            n_resamples=200)
    events: list[ProgressEvent] = []
    summary = await run_behavior_alignment(config, tmp_path / "run", on_progress=events.append)
    assert summary.labeller == "llm:test:default" and summary.system == "test:default"
    last = {e.stage: (e.done, e.total) for e in events}  # progress like every run kind, not a spinner
    assert last == {"labels": (6, 6), "responses": (3, 3), "system labels": (3, 3)}
    assert summary.responses == 3 and summary.ba is not None and summary.ba.n == 3  # d1 turns 2, 3; d2 turn 2
    assert set(summary.label_counts["labeller"]) <= set(strategy_names())


async def test_run_needs_exactly_one_labeller(tmp_path: Path) -> None:
    data = write_tsv(tmp_path / "d.tsv")
    with pytest.raises(PersonagraphError, match="exactly one of --labeller"):
        await run_behavior_alignment(BehaviorConfig(dialogues=data), tmp_path / "run")
    with pytest.raises(PersonagraphError, match="exactly one of --labeller"):
        await run_behavior_alignment(BehaviorConfig(dialogues=data, labeller="test:default",
                                                    classifier=tmp_path / "c.json"), tmp_path / "run")
