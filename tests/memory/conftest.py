"""Memory test fixtures: a tiny temporary Chroma bank with the real packaged MiniLM (small, offline)."""

from __future__ import annotations

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
    bank.add([
        Memory(id="1", user_id="a", time="2023-07-01", scene="Activity", emotion="Happy",
               event="Anna swam in the sea at the beach and built a sandcastle."),
        Memory(id="2", user_id="a", time="2023-03-02", scene="Activity", emotion="Anxious",
               event="Anna was nervous before her piano exam but passed it."),
        Memory(id="3", user_id="a", time="2023-01-05", scene="Preferences", emotion="Happy",
               event="Anna loves strawberry ice cream."),
        Memory(id="1", user_id="b", time="2022-08-09", scene="Activity", emotion="Happy",
               event="Ben went to the beach, swam in the sea and surfed the waves."),
        Memory(id="9", user_id="b", time="2022-02-09", scene="Others", emotion="Sad",
               event="Ben's goldfish died and he cried."),
    ])
    return bank
