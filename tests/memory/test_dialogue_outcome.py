"""Outcome accounting of ``memory eval-dialogue`` runs: failed recognitions, replies and judge calls are
listed, kept on request, and their test turns done again on resume (with only the calls that failed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from personagraph.memory.dialogue_eval import DialogueEvalConfig
from personagraph.runs.base import EXIT_INCOMPLETE
from personagraph.runs.memory_dialogue import run
from tests.runs.switch import assert_sent_only_failed_calls, switch_model


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
    config = DialogueEvalConfig(setting=1, model=responder.spec, judge=judge.spec)
    dialogues, memories = madial_files
    first = await run(config, dialogues, memories, tmp_path / "run")
    assert first.exit_code == EXIT_INCOMPLETE
    assert sorted((f.stage, f.item, f.model) for f in first.failures) == [
        ("intimacy", "s1:1:2", judge.spec),
        ("recognition", "s1:0:4", responder.spec), ("recognition", "s1:1:4", responder.spec),
        ("replies", "s1:0:4", responder.spec), ("replies", "s1:1:4", responder.spec),
    ]
    kept = await run(config.model_copy(update={"retry_failed": False}), dialogues, memories, tmp_path / "run")
    assert kept.llm_calls == 0 and kept.failures == first.failures and kept.retried == 0
    replied, judged = responder.up(), judge.up()
    second = await run(config, dialogues, memories, tmp_path / "run")
    assert second.failures == [], second.failures
    assert second.exit_code == 0 and second.retried == second.recovered == 5
    assert_sent_only_failed_calls(responder, replied, second.llm_calls)
    # the recovered replies are judged now: calls never made before, besides the failed pick
    assert_sent_only_failed_calls(judge, judged, second.llm_calls, never_made=True)
