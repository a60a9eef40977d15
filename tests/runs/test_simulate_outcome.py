"""Outcome accounting of session runs: failed turns and verdicts are listed, kept on request, and their
sessions run again on resume (on a fresh checkpoint thread; the cache replays every successful call)."""

from __future__ import annotations

from collections.abc import Awaitable
from pathlib import Path

import pytest

from personagraph import asimulate
from personagraph.agents.user_sim import STOP_TOKEN
from personagraph.errors import PersonagraphError
from personagraph.models.testing import register_script
from personagraph.runs.base import EXIT_INCOMPLETE
from personagraph.runs.simulate import SimulateSummary
from personagraph.store import RunStore
from tests.runs.switch import assert_kept_then_recovered, switch_model


async def test_failed_turns_and_verdicts_are_listed_then_the_session_is_retried(tmp_path: Path) -> None:
    agent = switch_model("sim-agent", down=lambda text: text.count('"role": "user"') >= 2)  # its 2nd turn
    judge = switch_model("sim-judge", down=lambda text: True)

    def again(retry_failed: bool) -> Awaitable[SimulateSummary]:
        return asimulate("A pediatric nurse", model=agent.spec, user_model="test:user", judges=[judge.spec],
                         turns=3, run_dir=tmp_path / "run", retry_failed=retry_failed)

    first = await again(True)
    sid = first.sessions[0]["id"]
    assert first.overall["finished"] == 1 and first.sessions[0]["stop_reason"] == "agent_failed"
    stages = sorted({(f.stage, f.model) for f in first.failures})
    assert stages == [("session verdicts", judge.spec), ("turn verdicts", judge.spec), ("turns", agent.spec)]
    assert f"{sid}/2" in {f.item for f in first.failures if f.stage == "turns"}
    # the recovered turn leads to turns never asked before
    second = await assert_kept_then_recovered(first, again, [agent, judge], never_made=(agent, judge))
    assert second.sessions[0]["stop_reason"] == "max_turns" and second.sessions[0]["agent_turns"] == 3
    store = RunStore(tmp_path / "run", readonly=True)
    assert store.get("session_retry", sid) == {"attempts": 1}
    store.close()


def _says(name: str, text: str) -> str:
    """A simulated user that always writes ``text``."""
    register_script(name, lambda messages, schema: text)
    return f"test:{name}"


async def test_S2_a_stop_marker_in_the_opening_message_is_not_a_stop(tmp_path: Path) -> None:
    user = _says("s2-hello-end", f"Hello there, how are you? {STOP_TOKEN}")
    summary = await asimulate("A pediatric nurse", model="test:agent", user_model=user, judges=["test:judge"],
                              turns=2, run_dir=tmp_path / "run")
    session = summary.sessions[0]
    assert (session["agent_turns"], session["stop_reason"]) == (1, "user_stop")  # the second message ends it
    assert summary.complete and summary.overall["finished"] == 1


async def test_S2_a_session_without_an_agent_turn_is_incomplete_with_its_reason(tmp_path: Path) -> None:
    user = _says("s2-only-end", STOP_TOKEN)
    summary = await asimulate("A pediatric nurse", model="test:agent", user_model=user, judges=["test:judge"],
                              turns=2, run_dir=tmp_path / "run")
    assert summary.sessions[0]["agent_turns"] == 0
    assert summary.exit_code == EXIT_INCOMPLETE and summary.overall["finished"] == 0
    assert summary.overall["too_short"] == 1
    (short,) = [f for f in summary.failures if f.stage == "sessions"]
    assert short.reason.startswith("0 agent turn(s), fewer than the 1 a session needs")


async def test_S2_a_session_shorter_than_min_turns_is_incomplete(tmp_path: Path) -> None:
    user = _says("s2-bye", f"Thanks, that is all I needed. {STOP_TOKEN}")  # ends after the first reply
    run = {"model": "test:agent", "user_model": user, "judges": ["test:judge"], "turns": 3}
    enough = await asimulate("A pediatric nurse", **run, run_dir=tmp_path / "one")
    assert enough.complete and enough.sessions[0]["agent_turns"] == 1
    short = await asimulate("A pediatric nurse", **run, min_turns=2, run_dir=tmp_path / "two")
    assert short.exit_code == EXIT_INCOMPLETE and short.overall["finished"] == 0
    assert [f.reason for f in short.failures] == [
        "1 agent turn(s), fewer than the 2 a session needs (stopped: user_stop)"]


async def test_S2_min_turns_cannot_exceed_turns(tmp_path: Path) -> None:
    with pytest.raises(PersonagraphError, match="min_turns 3 is more than turns 2"):
        await asimulate("A pediatric nurse", model="test:agent", user_model="test:user", turns=2, min_turns=3,
                        run_dir=tmp_path / "run")
    assert not (tmp_path / "run").exists()
