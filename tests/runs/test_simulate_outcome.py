"""Outcome accounting of session runs: failed turns and verdicts are listed, kept on request, and their
sessions run again on resume (on a fresh checkpoint thread; the cache replays every successful call)."""

from __future__ import annotations

from pathlib import Path

from personagraph import asimulate
from personagraph.runs.base import EXIT_INCOMPLETE
from personagraph.runs.simulate import SimulateConfig, run
from personagraph.store import RunStore
from tests.runs.switch import assert_sent_only_failed_calls, switch_model


async def test_failed_turns_and_verdicts_are_listed_then_the_session_is_retried(tmp_path: Path) -> None:
    agent = switch_model("sim-agent", down=lambda text: text.count('"role": "user"') >= 2)  # its 2nd turn
    judge = switch_model("sim-judge", down=lambda text: True)
    config = SimulateConfig(persona="A pediatric nurse", model=agent.spec, user_model="test:user",
                            judges=[judge.spec], turns=3)
    first = await run(config, tmp_path / "run")
    assert first.exit_code == EXIT_INCOMPLETE and first.overall["finished"] == 1
    sid = first.sessions[0]["id"]
    stages = sorted({(f.stage, f.model) for f in first.failures})
    assert stages == [("session verdicts", judge.spec), ("turn verdicts", judge.spec), ("turns", agent.spec)]
    assert f"{sid}/2" in {f.item for f in first.failures if f.stage == "turns"}
    assert first.sessions[0]["stop_reason"] == "agent_failed"
    kept = await asimulate("A pediatric nurse", model=agent.spec, user_model="test:user", judges=[judge.spec],
                           turns=3, run_dir=tmp_path / "run", retry_failed=False)  # the API's keyword
    assert kept.llm_calls == 0 and kept.failures == first.failures and kept.retried == 0
    agent_before, judge_before = agent.up(), judge.up()
    second = await run(config, tmp_path / "run")
    assert second.exit_code == 0 and second.failures == []
    assert second.retried == second.recovered == len(first.failures)
    assert second.sessions[0]["stop_reason"] == "max_turns" and second.sessions[0]["agent_turns"] == 3
    # the recovered turn leads to turns never asked before; no successful call is sent twice
    assert_sent_only_failed_calls(agent, agent_before, second.llm_calls, never_made=True)
    assert_sent_only_failed_calls(judge, judge_before, second.llm_calls, never_made=True)
    store = RunStore(tmp_path / "run", readonly=True)
    assert store.get("session_retry", sid) == {"attempts": 1}
    store.close()
    again = await run(config, tmp_path / "run")
    assert again.llm_calls == 0 and again.exit_code == 0 and again.retried == 0
