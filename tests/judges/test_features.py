"""Text evidence (judges/features.py) and the baselines meta-eval puts beside every judge."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from personagraph.judges.features import (
    BASELINES,
    Text,
    acompute,
    compute,
    knowledge_stems,
    last_turn,
    partner_text,
    repetition,
    sentences,
    word_overlap,
)
from personagraph.judges.meta_eval import MetaEvalConfig
from personagraph.judges.stats import spearman_difference
from personagraph.models.testing import register_script
from personagraph.runs.meta_eval import run as run_meta_eval

RESPONSE = re.compile(r"\[BEGIN RESPONSE #(\w+)\]\n(.*?)\n\[END RESPONSE #\1\]", re.DOTALL)
DIALOGUE = "User1: do you have pets ?\nUser2: i have a lab named trooper\nUser1: i love dogs and hiking !"
PERSONA = "I like to go hiking in the spring. I have a black lab named trooper. I live in colorado."


def test_partner_and_last_turn_of_a_dialogue() -> None:
    assert partner_text(DIALOGUE) == "do you have pets ?\ni love dogs and hiking !"
    assert last_turn(DIALOGUE) == "i love dogs and hiking !"
    assert partner_text("What is your job?") == "What is your job?"  # no speakers: all of it is the partner's


def test_knowledge_features() -> None:
    brings = Text(PERSONA, DIALOGUE, "i go hiking in colorado every spring")
    echoes = Text(PERSONA, DIALOGUE, "hiking is great")  # 'hiking' was the partner's word
    assert word_overlap(brings) == 2 and word_overlap(echoes) == 1  # hiking + spring (colorado: another fact)
    assert word_overlap(Text(PERSONA, DIALOGUE, "we hiked each spring")) == 2  # by stem: hiked/hiking
    assert knowledge_stems(brings) == 2 and knowledge_stems(echoes) == 0  # spring, colorado
    asks = Text(PERSONA, DIALOGUE, "do you go to colorado in the spring ? i do .")  # asked, not stated
    assert knowledge_stems(asks) == 0
    assert knowledge_stems(Text(PERSONA, DIALOGUE, "spring ? colorado !")) == 1  # per sentence
    assert repetition(Text(PERSONA, DIALOGUE, "i am a student , but i am a student")) == 3
    assert repetition(brings) == 0


def test_knowledge_stems_leave_out_attitude_words() -> None:
    persona = "I love dogs. My favorite color is red. I am a piano teacher."
    dialogue = "User1: i have a red bunny\nUser2: cute !\nUser1: i live on a farm ."

    def stated(response: str) -> float:
        return knowledge_stems(Text(persona, dialogue, response))

    assert stated("i love to travel .") == 0  # "love" frames a fact, it states none
    assert stated("my favorite color is blue .") == 1  # "color" stays: the fact's topic
    assert stated("i am a piano teacher , i love it .") == 2  # piano, teacher: the knowledge itself
    assert stated("do you like piano ?") == 0  # asked, not stated
    assert stated("red dogs on a farm .") == 1  # red and farm were the partner's words


def test_a_fact_stated_in_one_sentence_is_not_diluted_by_the_others() -> None:
    assert sentences("i ride horses . i live in texas ! you ?") == ["i ride horses .", "i live in texas !",
                                                                   "you ?"]
    assert sentences("no stop at all") == ["no stop at all"]
    long = "that is nice . my black lab trooper loves it . what about you ? do you work ? i am tired today ."
    name = ["sentence_fact_similarity"]
    diluted, alone = compute(name, [Text(PERSONA, DIALOGUE, long),
                                    Text(PERSONA, DIALOGUE, "my black lab trooper loves it .")])[name[0]]
    assert diluted == pytest.approx(alone)  # its best sentence: "I have a black lab named trooper"
    unrelated = compute(name, [Text(PERSONA, DIALOGUE, "i am tired today .")])[name[0]][0]
    assert alone > unrelated + 0.1


def test_likelihood_features_score_the_reply_after_persona_dialogue_and_nothing(monkeypatch) -> None:
    """persona_pmi and dialogue_pmi are differences of the reply's log-likelihood after three prefixes,
    said under the responder's name (the other speaker; "Answer" after a plain question); character_fit
    is the model's P(Yes) to whether the character could say the reply, asked about the line it answers."""
    import personagraph.likelihood as likelihood

    seen: list[tuple[str, str]] = []
    asked: list[str] = []

    async def fit(messages):
        asked.append(messages[-1]["content"])
        return 0.25 if 'answered: "hiking' in asked[-1] else 0.75

    async def fake(pairs):  # log-likelihood −1 per prefix line not read: more context, likelier reply
        seen.extend(pairs)
        return [np.array([-10.0 + prefix.count("\n"), -1.0]) for prefix, _ in pairs]

    monkeypatch.setattr(likelihood, "continuation_logprobs", fake)
    monkeypatch.setattr(likelihood, "yes_probability", fit)
    dialogue = Text(PERSONA, DIALOGUE, "my lab trooper loves it too")
    plain = Text(PERSONA, "What do you do on weekends?", "hiking with trooper")
    values = asyncio.run(acompute(("persona_pmi", "dialogue_pmi", "character_fit", "response_loglik"),
                                  [dialogue, plain]))
    question = "Question: What do you do on weekends?"
    assert [p for p, _ in seen[:3]] == [f"Persona of User2: {PERSONA}\n\n{DIALOGUE}\nUser2:",
                                        f"{DIALOGUE}\nUser2:", "User2:"]
    assert [p for p, _ in seen[3:]] == [f"Persona of Answer: {PERSONA}\n\n{question}\nAnswer:",
                                        f"{question}\nAnswer:", "Answer:"]
    assert {c for _, c in seen} == {" my lab trooper loves it too", " hiking with trooper"}
    assert values == {"persona_pmi": [2.0, 2.0], "dialogue_pmi": [3.0, 1.0], "character_fit": [0.75, 0.25],
                      "response_loglik": [-3.0, -4.0]}
    last_line = DIALOGUE.splitlines()[-1].split(": ", 1)[1]
    assert f'Profile of User2: {PERSONA}' in asked[0] and f'said to User2: "{last_line}"' in asked[0]
    assert 'User2 answered: "my lab trooper loves it too"' in asked[0]
    assert 'said to Answer: "What do you do on weekends?"' in asked[1]


@pytest.mark.embedded
async def test_persona_pmi_is_higher_for_a_reply_that_uses_the_persona() -> None:
    uses = Text(PERSONA, DIALOGUE, "me too ! i take my black lab trooper hiking every spring")
    generic = Text(PERSONA, DIALOGUE, "that is nice . what else do you like ?")
    knowing, ignoring = (await acompute(("persona_pmi",), [uses, generic]))["persona_pmi"]
    assert knowing > ignoring + 2


@pytest.mark.embedded
async def test_character_fit_is_lower_for_a_reply_that_contradicts_the_persona() -> None:
    fits = Text(PERSONA, DIALOGUE, "me too ! i take my black lab trooper hiking every spring")
    contradicts = Text(PERSONA, DIALOGUE, "i have never owned a dog and i hate hiking")
    fit, contradiction = (await acompute(("character_fit",), [fits, contradicts]))["character_fit"]
    assert 0 <= contradiction < fit <= 1


def test_every_baseline_is_computed_in_order() -> None:
    replies = ("my lab trooper loves the spring trails", "ok", "i like cars")
    texts = [Text(PERSONA, DIALOGUE, r) for r in replies]
    values = compute(BASELINES, texts)
    assert set(values) == {"length", "word_overlap", "embedding_similarity"}
    assert values["length"] == [7.0, 1.0, 3.0]
    assert values["embedding_similarity"][0] > values["embedding_similarity"][2]
    with pytest.raises(KeyError, match="unknown text feature 'nope'"):
        compute(["nope"], texts)
    with pytest.raises(KeyError, match="a likelihood feature .acompute. 'persona_pmi'"):
        compute(["persona_pmi"], texts)  # asks the engine: only the async path does


def test_spearman_difference_of_a_scorer_with_itself_is_zero() -> None:
    rng = np.random.default_rng(0)
    human = rng.normal(size=60)
    scorer = human + rng.normal(size=60)
    same = spearman_difference(scorer, scorer, human, n_resamples=300)
    assert same.value == 0 and same.ci_low == 0 and same.ci_high == 0
    better = spearman_difference(human + 0.1 * rng.normal(size=60), scorer, human, n_resamples=300)
    assert better.ci_low is not None and better.ci_low > 0


def by_length(messages: list[dict[str, Any]], schema: dict[str, Any] | None) -> str:
    """A judge that scores by the response's length alone."""
    response = RESPONSE.search(messages[1]["content"]).group(2)
    return json.dumps({"rationale": "longer is better", "score": min(5, 1 + len(response.split()) // 3)})


register_script("by-length", by_length)


def test_meta_eval_flags_a_judge_that_does_not_beat_the_length_baseline(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    items = []
    for i in range(40):  # humans rate longer replies higher, noisily: length is a fair baseline here
        words = int(rng.integers(1, 14))
        human = min(5, max(1, round(1 + words / 3 + rng.normal(0, 0.8))))
        items.append({"id": f"r{i}", "persona": "I am a nurse.", "question": "Your job?",
                      "response": " ".join(["word"] * words), "criterion": "persona_consistency",
                      "human": [human]})
    path = tmp_path / "items.jsonl"
    path.write_text("\n".join(json.dumps(it) for it in items) + "\n", encoding="utf-8")
    config = MetaEvalConfig(items=str(path), judges=["test:by-length"], n_resamples=300,
                            judge_protocol="rationale")
    summary = asyncio.run(run_meta_eval(config, tmp_path / "run")).model_dump()
    section = summary["results"]["persona_consistency"]
    assert set(section["baselines"]) == set(BASELINES)
    judge = section["judges"]["test:by-length"]
    assert section["best_baseline"] == "length"
    versus = judge["vs_best_baseline"]
    assert versus["baseline"] == "length" and versus["beats"] is False
    assert abs(versus["spearman_difference"]["value"]) < 0.1  # it is the length baseline, rounded


def test_only_the_engine_readings_asked_for_are_computed(monkeypatch) -> None:
    """A model that reads the likelihoods does not pay for the character-fit question, and the reverse."""
    import personagraph.likelihood as likelihood

    calls: list[str] = []

    async def passes(pairs):
        calls.append("passes")
        return [np.array([-1.0]) for _ in pairs]

    async def fit(messages):
        calls.append("fit")
        return 0.5

    monkeypatch.setattr(likelihood, "continuation_logprobs", passes)
    monkeypatch.setattr(likelihood, "yes_probability", fit)
    text = Text(PERSONA, DIALOGUE, "my lab trooper loves it too")
    assert asyncio.run(acompute(("persona_pmi",), [text])) == {"persona_pmi": [0.0]} and calls == ["passes"]
    calls.clear()
    assert asyncio.run(acompute(("character_fit",), [text])) == {"character_fit": [0.5]} and calls == ["fit"]
