"""Memory test fixtures: a tiny temporary Chroma bank with the real packaged MiniLM (small, offline)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from personagraph.memory.bank import Memory, MemoryBank


@pytest.fixture
def bank(tmp_path: Path) -> MemoryBank:
    """An empty local bank in a temp folder."""
    return MemoryBank(tmp_path / "chroma")


@pytest.fixture
def two_users(bank: MemoryBank) -> MemoryBank:
    """User a and user b each remember a beach trip, plus other things."""
    bank.add(
        [
            Memory(
                id="1",
                user_id="a",
                time="2023-07-01",
                scene="Activity",
                emotion="Happy",
                event="Anna swam in the sea at the beach and built a sandcastle.",
            ),
            Memory(
                id="2",
                user_id="a",
                time="2023-03-02",
                scene="Activity",
                emotion="Anxious",
                event="Anna was nervous before her piano exam but passed it.",
            ),
            Memory(
                id="3",
                user_id="a",
                time="2023-01-05",
                scene="Preferences",
                emotion="Happy",
                event="Anna loves strawberry ice cream.",
            ),
            Memory(
                id="1",
                user_id="b",
                time="2022-08-09",
                scene="Activity",
                emotion="Happy",
                event="Ben went to the beach, swam in the sea and surfed the waves.",
            ),
            Memory(
                id="9",
                user_id="b",
                time="2022-02-09",
                scene="Others",
                emotion="Sad",
                event="Ben's goldfish died and he cried.",
            ),
        ]
    )
    return bank


LINES = [
    "<BOD>\n",
    '<Bart>: "I am nervous about my exam."\n',
    '<Assistant>: "Oh no, why?"\n',
    '<Bart>: "I did not study enough."\n',
    '<Assistant>: "Remember your math test?"\n',
    "<EOD>\n",
]


@pytest.fixture
def madial_files(tmp_path: Path) -> tuple[Path, Path]:
    """A tiny MADial pair: 6 memories of user 1, two dialogues (three test turns)."""
    events = [
        "Bart was anxious before a math test but did well.",
        "Bart ate pizza.",
        "Bart played football.",
        "Bart drew a cat.",
        "Bart went swimming.",
        "Bart read a comic.",
    ]
    memories = tmp_path / "m.jsonl"
    memories.write_text(
        "".join(
            json.dumps(
                {
                    str(i + 1): {
                        "time": f"2023-01-0{i + 1}",
                        "scene": "Activity",
                        "emotion": "Anxious" if i == 0 else "Happy",
                        "event": e,
                    }
                }
            )
            + "\n"
            for i, e in enumerate(events)
        )
    )
    dialogues = tmp_path / "d.jsonl"
    rows = [
        {"dialogue": LINES, "test-turn": [4], "relevant-id": [1], "user-id": 1},
        {"dialogue": LINES, "test-turn": [2, 4], "relevant-id": [1, 2], "user-id": 1},
    ]
    dialogues.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return dialogues, memories
