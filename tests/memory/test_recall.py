"""Recall methods on a tiny bank: isolation holds for every method, signals do what they claim."""

from __future__ import annotations

import numpy as np
import pytest

from personagraph.memory.bank import MemoryBank
from personagraph.memory.context import DialogueContext, Turn, context_from_lines
from personagraph.memory.recall import METHODS, Recaller, RecallSettings, bm25_scores, rrf, tokenize, zscore


def ctx(*user_lines: str) -> DialogueContext:
    turns = []
    for line in user_lines:
        turns += [Turn(speaker="Anna", text=line), Turn(speaker="Assistant", text="Tell me more!")]
    return DialogueContext(turns=turns[:-1])


@pytest.mark.parametrize("method", METHODS)
def test_every_method_stays_inside_the_user(two_users: MemoryBank, method: str) -> None:
    recaller = Recaller(two_users, RecallSettings(method=method))
    found = recaller.rank("a", ctx("We went to the beach and I surfed big waves in the sea!"), k=10)
    assert found and {r.memory.user_id for r in found} == {"a"}
    assert found[0].memory.id == "1"  # the beach memory


async def test_recall_async_and_components(two_users: MemoryBank) -> None:
    found = await Recaller(two_users).recall(
        "a", ctx("I have a piano exam tomorrow and I'm so worried."), k=2
    )
    assert next(r.memory.id for r in found) == "2"
    assert {"dense.prefix", "dense.turns_lse", "bm25", "emotion"} <= set(found[0].components)


def test_proactive_filter_puts_detected_emotion_first(two_users: MemoryBank) -> None:
    settings = RecallSettings(method="proactive", proactive="filter")
    found = Recaller(two_users, settings).rank("a", ctx("I feel so nervous and scared today."), k=3)
    assert found[0].memory.emotion == "Anxious"
    given = Recaller(two_users, settings).rank("a", ctx("Let's talk."), k=3, emotion="Happy")
    assert given[0].memory.emotion == "Happy" and given[1].memory.emotion == "Happy"


def test_scene_filter(two_users: MemoryBank) -> None:
    settings = RecallSettings(method="proactive", proactive="filter")
    found = Recaller(two_users, settings).rank("a", ctx("What do you think?"), k=3, scene="Preferences")
    assert found[0].memory.scene == "Preferences"


def test_candidate_pool_is_whole_user_when_small(two_users: MemoryBank) -> None:
    cands = Recaller(two_users).candidates("a", ctx("hello"))
    assert sorted(m.id for m in cands.memories) == ["1", "2", "3"]
    assert all(len(v) == 3 for v in cands.components.values())


def test_tokenize_and_bm25() -> None:
    assert tokenize("Anna's dogs were running!") == ["anna", "dog", "run"]
    scores = bm25_scores("running dogs", ["the dog runs", "cats sleep", "a cat"])
    assert scores.argmax() == 0 and scores[1] == scores[2] == 0


def test_fusion_helpers() -> None:
    assert np.allclose(zscore(np.array([2.0, 2.0])), 0)
    fused = rrf([np.array([3.0, 2.0, 1.0]), np.array([1.0, 2.0, 3.0])], k=60)
    assert fused[1] == pytest.approx(2 / 62) and fused[0] == pytest.approx(1 / 61 + 1 / 63)


def test_context_views_and_madial_parsing() -> None:
    lines = [
        "<BOD>\n",
        '<Lisa>: "I made a kite!"\n',
        '<None>: "Cool!"\n',
        "<Mom said so.>\n",
        '<Lisa>: "It flew high."\n',
    ]
    c = context_from_lines(lines)
    # an untagged or "None" line goes to the speaker who is due (the opposite of the previous turn)
    assert [t.speaker for t in c.turns] == ["Lisa", "Assistant", "Lisa", "Lisa"]
    views = c.views()
    assert views["prefix"] == "".join(lines)
    assert views["last_user"] == "It flew high."


async def test_llm_reranker_reorders_top_and_survives_failure(two_users: MemoryBank) -> None:
    import json

    from personagraph.models import ModelClient
    from personagraph.models.testing import register_script

    register_script("rerank-reverse", lambda messages, schema: json.dumps({"ranking": [3, 2, 1]}))
    base = Recaller(two_users).rank("a", ctx("beach day"), k=3)
    settings = RecallSettings(rerank_top=3)
    flipped = await Recaller(
        two_users, settings, reranker=ModelClient.create("test:rerank-reverse", "r")
    ).recall("a", ctx("beach day"), k=3)
    assert [r.memory.id for r in flipped] == [r.memory.id for r in base][::-1]
    kept = await Recaller(two_users, settings, reranker=ModelClient.create("test:broken", "r")).recall(
        "a", ctx("beach day"), k=3
    )
    assert [r.memory.id for r in kept] == [r.memory.id for r in base]
