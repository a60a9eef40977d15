"""MADial loaders (malformed lines name file and line) and the setting-2/3 candidates."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from personagraph.errors import PersonagraphError
from personagraph.memory.bank import Memory
from personagraph.memory.madial import (
    MadialDialogue,
    load_dialogues,
    load_memories,
    setting2_candidates,
    setting3_candidates,
)

DIALOGUE = {
    "dialogue": [
        "<BOD>\n",
        '<Bart>: "I won a race!"\n',
        '<Assistant>: "Great!"\n',
        '<Bart>: "I love running."\n',
        '<Assistant>: "Remember the sports day?"\n',
        "<EOD>\n",
    ],
    "test-turn": [4],
    "relevant-id": [3, 5],
    "user-id": 1,
}


def write_jsonl(path: Path, rows: list) -> Path:
    path.write_text(
        "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8"
    )
    return path


def test_load_dialogues(tmp_path: Path) -> None:
    [d] = load_dialogues(write_jsonl(tmp_path / "d.json", [DIALOGUE]))
    assert d.user_id == "1" and d.relevant_ids == ["3", "5"] and d.gold_id == "3"
    assert d.query() == "".join(DIALOGUE["dialogue"][:4])
    ctx = d.context()
    assert [t.speaker for t in ctx.turns] == ["Bart", "Assistant", "Bart"]
    assert ctx.user_turns() == ["I won a race!", "I love running."]
    assert d.reference(4) == "Remember the sports day?"


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ('{"dialogue": [', "invalid JSON"),
        ({**DIALOGUE, "test-turn": [9]}, "outside the dialogue"),
        ({k: v for k, v in DIALOGUE.items() if k != "relevant-id"}, "missing field 'relevant-id'"),
        ([1, 2], "expected a JSON object"),
    ],
)
def test_malformed_dialogue_line_names_file_and_line(tmp_path: Path, bad: object, message: str) -> None:
    path = write_jsonl(tmp_path / "d.json", [DIALOGUE, bad])
    with pytest.raises(PersonagraphError) as err:
        load_dialogues(path)
    assert f"{path}:2:" in str(err.value) and message in str(err.value)


def test_load_memories_split_and_errors(tmp_path: Path) -> None:
    rows = [
        {str(i): {"time": "2023-01-01", "scene": "Activity", "emotion": "Happy", "event": f"event {i}"}}
        for i in (1, 3, 2)
    ]
    mems = load_memories(write_jsonl(tmp_path / "m.json", rows), split=2)
    assert [(m.id, m.user_id) for m in mems] == [("1", "1"), ("3", "1"), ("2", "2")]
    bad = write_jsonl(tmp_path / "bad.json", [rows[0], '{"4": {"time": "x"}}'])
    with pytest.raises(PersonagraphError, match=rf"{bad}:2: event"):
        load_memories(bad)
    broken = write_jsonl(tmp_path / "broken.json", [rows[0], "not json"])
    with pytest.raises(PersonagraphError, match=rf"{broken}:2: invalid JSON"):
        load_memories(broken)


def _pool() -> dict[str, Memory]:
    events = {
        "1": "gold event",
        "2": "relevant too",
        "3": "negative A",
        "4": "Negative a!",
        "5": "negative B",
        "6": "negative C",
        "7": "negative D",
        "8": "negative E",
    }
    return {k: Memory(id=k, user_id="1", event=v) for k, v in events.items()}


def _dialogue(index: int = 0) -> MadialDialogue:
    return MadialDialogue(
        index=index,
        lines=["<BOD>\n", '<Bart>: "hi"\n', '<Assistant>: "x"\n'],
        test_turns=[2],
        relevant_ids=["1", "2"],
        user_id="1",
    )


def test_setting2_gold_plus_deduplicated_nonrelevant_negatives() -> None:
    ranked = ["2", "3", "4", "1", "5", "6", "7"]
    cands = setting2_candidates(_dialogue(), ranked, _pool(), seed=7)
    ids = [m.id for m in cands]
    assert len(ids) == 5 and "1" in ids and "2" not in ids  # gold in, other relevant out
    assert "4" not in ids  # "Negative a!" duplicates "negative A" once normalized
    assert sorted(ids) == ["1", "3", "5", "6", "7"]


def test_setting2_is_seeded_and_per_dialogue() -> None:
    ranked = ["3", "5", "6", "7", "8"]
    first = [m.id for m in setting2_candidates(_dialogue(), ranked, _pool(), seed=1)]
    again = [m.id for m in setting2_candidates(_dialogue(), ranked, _pool(), seed=1)]
    assert first == again
    orders = {
        tuple(m.id for m in setting2_candidates(_dialogue(), ranked, _pool(), seed=s)) for s in range(20)
    }
    assert len(orders) > 1  # the seed changes the shuffle
    assert all(sorted(o) == sorted(first) for o in orders)  # but not the members


def test_setting2_fills_from_pool_when_ranking_is_short() -> None:
    cands = setting2_candidates(_dialogue(), ["3"], _pool(), seed=3)
    assert len(cands) == 5 and {"1", "3"} <= {m.id for m in cands}


def test_setting3_is_top_k_in_order() -> None:
    assert [m.id for m in setting3_candidates(["5", "3", "5", "1", "6", "7", "8"], _pool())] == [
        "5",
        "3",
        "1",
        "6",
        "7",
    ]
