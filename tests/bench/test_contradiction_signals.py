"""bench/contradiction_signals.py: the fact shown is the profile's sentence about what was answered, answers
are read once and cached, and rubric_dev's pairs are scored original against contradiction."""

from __future__ import annotations

import asyncio
import json

import numpy as np

from bench.contradiction_signals import Record, pairwise, questions, records, support
from personagraph.judges.features import Text

COWBOY = Text(persona="I keep three horses on my ranch. My sister teaches piano in Dallas.",
              question="User1: what animals do you keep?", response="Three horses, out on the ranch.")


def test_the_fact_shown_is_the_profile_sentence_about_the_answer() -> None:
    with_fact, without = questions(COWBOY)
    assert "- I keep three horses on my ranch." in with_fact[1]["content"]
    assert "piano" not in with_fact[1]["content"]
    assert "Facts about" not in without[1]["content"]
    assert '"what animals do you keep?"' in without[1]["content"]  # the line answered, not its speaker


def test_answers_are_cached_and_read_back(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("PERSONAGRAPH_LIKELIHOOD_MODEL", "test")  # P(Yes) 0.5 each: support 0
    recs = [Record("usr", "a", COWBOY)]
    assert asyncio.run(support(recs, tmp_path)).tolist() == [0.0]
    stored = [json.loads(line) for line in next(tmp_path.glob("answers-*.jsonl")).read_text().splitlines()]
    assert len(stored) == 2
    cache = next(tmp_path.glob("answers-*.jsonl"))
    rows = [{**row, "p": 0.8 if k == 0 else 0.2} for k, row in enumerate(stored)]  # with the fact, without
    cache.write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert np.isclose(asyncio.run(support(recs, tmp_path))[0], 2 * np.log(4))  # logit 0.8 − logit 0.2


def test_rubric_dev_pairs_an_original_with_its_contradiction(tmp_path) -> None:
    (tmp_path / "items.jsonl").write_text(json.dumps({
        "id": "cowboy-x", "persona": COWBOY.persona, "question": "q?", "response": "I ride.",
        "contradiction": "I never rode."}) + "\n")
    row = {"id": "c1-0", "persona": COWBOY.persona, "question": "User1: hi", "response": "hello",
           "criterion": "persona_consistency", "human": [1], "scale": [1, 4]}
    for name in ("usr_knowledge.jsonl", "usr_overall.jsonl", "characterbench_attribute_consistency_bot.jsonl",
                 "characterbench_attribute_consistency_human.jsonl",
                 "characterbench_behavior_consistency_human.jsonl"):
        (tmp_path / name).write_text(json.dumps(row) + "\n")
    _, recs = records(tmp_path, tmp_path / "items.jsonl")
    assert [r.source for r in recs] == ["usr", "cb_bot", "cb_human", "cb_behavior", *["rubric_dev"] * 2]
    assert [(r.id, r.text.response) for r in recs[-2:]] == [("cowboy-x", "I ride."),
                                                             ("cowboy-x-c", "I never rode.")]
    assert pairwise({"a": 2.0, "a-c": 1.0, "b": 0.0, "b-c": 1.0, "c": 1.0, "c-c": 1.0}).startswith("0.50 [")
