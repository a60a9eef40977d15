"""Plug-in agents' replies go through the run store's response cache, so a resumed run asks nothing twice."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from personagraph.agents.cached import CachedAgent
from personagraph.agents.plugin import adapt
from personagraph.runs.eval import EvalConfig
from personagraph.runs.eval import run as run_eval
from personagraph.models import Meter
from personagraph.schemas import Persona
from personagraph.store import RunStore


async def test_same_request_is_answered_from_the_store_and_failures_are_asked_again(tmp_path: Path) -> None:
    asked: list[str] = []

    async def agent(messages: list[dict[str, str]]) -> str:
        asked.append(messages[-1]["content"])
        if "fail" in messages[-1]["content"]:
            raise RuntimeError("backend down")
        return f"Reply to {messages[-1]['content']}"

    store, meter = RunStore(tmp_path), Meter()
    cached = CachedAgent(adapt(agent, "mod:agent"), store, meter)
    first = await cached.respond("A nurse", [{"role": "user", "content": "Hi"}])
    again = await cached.respond("A nurse", [{"role": "user", "content": "Hi"}])
    other = await cached.respond("A pilot", [{"role": "user", "content": "Hi"}])
    assert first.text == again.text == "Reply to Hi" and again.cached and not other.cached
    assert asked == ["Hi", "Hi"] and cached.name == "mod:agent"
    for _ in range(2):
        failed = await cached.respond("A nurse", [{"role": "user", "content": "please fail"}])
        assert not failed.ok
    assert asked.count("please fail") == 2
    assert meter.calls == {"persona": 2} and meter.cache_hits == {"persona": 1} and meter.failures == {"persona": 2}


async def test_interrupted_eval_resumes_without_asking_the_plugin_again(tmp_path: Path) -> None:
    asked: list[str] = []

    async def agent(messages: list[dict[str, str]]) -> str:
        asked.append(messages[-1]["content"])
        return "Well partner, I'd saddle up and ride out at first light."

    config = EvalConfig(personas=[Persona(description="A 70-year-old retired cowboy from Texas")],
                       models=["cowboy:agent"], judges=["test:j1"], generator="test:gen",
                       environments=2, questions_per_task=1)
    first = await run_eval(config, tmp_path, agents=[adapt(agent, "cowboy:agent")])
    answered = len(asked)
    assert answered == 5 and first.roles["persona"]["calls"] == 5
    db = sqlite3.connect(tmp_path / "run.sqlite")  # as if killed before the unit was marked finished
    db.execute("DELETE FROM records WHERE kind IN ('unit_done', 'persona_done')")
    db.commit()
    db.close()
    (tmp_path / "checkpoints.sqlite").unlink(missing_ok=True)
    resumed = await run_eval(config, tmp_path, agents=[adapt(agent, "cowboy:agent")])
    assert len(asked) == answered and resumed.llm_calls == 0
    assert resumed.roles["persona"]["cache_hits"] == 5
    assert resumed.models == first.models
