"""Outcome accounting of ``memory eval-dialogue`` runs: failed recognitions, replies and judge calls are
listed, kept on request, and their test turns done again on resume (with only the calls that failed)."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import pytest

from personagraph import amemory_dialogue
from personagraph.errors import PersonagraphError
from tests.runs.switch import assert_kept_then_recovered, switch_model


async def test_failed_items_are_listed_then_their_turns_retried(
    tmp_path: Path, madial_files: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        "personagraph.memory.madial.facts",
        lambda: {"memory_split": 76, "users": {}, "conversation_date": "2024-06-15"},
    )
    responder = switch_model("md-responder", down=lambda text: "study enough" in text)  # the turn-4 replies
    picks = lambda text: '{"best": 1}' if "feel closest" in text else None  # noqa: E731 - a valid pick
    judge = switch_model("md-judge", down=lambda text: "feel closest" in text, answer=picks)  # every pick
    dialogues, memories = madial_files

    def again(retry_failed: bool) -> Awaitable[Any]:
        return amemory_dialogue(dialogues, memories, setting=1, model=responder.spec, judge=judge.spec,
                                run_dir=tmp_path / "run", retry_failed=retry_failed)

    first = await again(True)
    assert sorted((f.stage, f.item, f.model) for f in first.failures) == [
        ("intimacy", "s1:1:2", judge.spec),
        ("recognition", "s1:0:4", responder.spec), ("recognition", "s1:1:4", responder.spec),
        ("replies", "s1:0:4", responder.spec), ("replies", "s1:1:4", responder.spec),
    ]
    # the recovered replies are judged now: calls never made before, besides the failed pick
    await assert_kept_then_recovered(first, again, [responder, judge], never_made=(judge,))


@pytest.mark.parametrize("kind, damage, names", [
    ("madial_verdict", "json_remove(data, '$.scores')", "(scores: Field required)"),
    ("madial_response", "json_set(data, '$.turn', 'four')", "(turn: Input should be a valid integer"),
    ("madial_summary", "json_set(data, '$.criteria', 3)", "(criteria: Input should be a valid dictionary"),
])
async def test_a_damaged_record_is_one_line_and_its_delete_keeps_the_others(
    tmp_path: Path, madial_files: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, kind: str, damage: str,
    names: str,
) -> None:
    monkeypatch.setattr(
        "personagraph.memory.madial.facts",
        lambda: {"memory_split": 76, "users": {}, "conversation_date": "2024-06-15"},
    )
    dialogues, memories = madial_files

    def again() -> Awaitable[Any]:
        return amemory_dialogue(dialogues, memories, setting=1, model="test:default", judge="test:judge",
                                run_dir=tmp_path / "run")

    first = await again()
    db = sqlite3.connect(tmp_path / "run" / "run.sqlite")
    first_row = "rowid=(SELECT min(rowid) FROM records WHERE kind=?)"
    db.execute(f"UPDATE records SET data={damage} WHERE {first_row}", (kind,))
    db.commit()
    with pytest.raises(PersonagraphError) as refused:
        await again()
    line = str(refused.value)
    assert "\n" not in line and f"run.sqlite: record {kind} " in line and names in line, line
    delete = re.search(r'sqlite3 \S+ "([^"]+)"', line)
    assert delete, line
    before = db.execute("SELECT count(*) FROM records").fetchone()[0]
    db.execute(delete.group(1))
    db.commit()
    assert db.execute("SELECT count(*) FROM records").fetchone()[0] == before - 1
    db.close()
    redone = await again()  # the deleted row is written again, from the response cache
    assert redone.llm_calls == 0 and redone.exit_code == first.exit_code == 0
