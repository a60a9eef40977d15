"""Outcome accounting of session runs: failed turns and verdicts are listed, kept on request, and their
sessions run again on resume (on a fresh checkpoint thread; the cache replays every successful call)."""

from __future__ import annotations

from collections.abc import Awaitable
from pathlib import Path

from personagraph import asimulate
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
