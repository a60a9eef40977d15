"""Outcome accounting of ``memory eval-dialogue`` runs: failed recognitions, replies and judge calls are
listed, kept on request, and their test turns done again on resume (with only the calls that failed)."""

from __future__ import annotations

from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import pytest

from personagraph import amemory_dialogue
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
