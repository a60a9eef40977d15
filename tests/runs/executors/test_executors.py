"""Executors: the local default, option errors, and Ray producing what the local executor produces."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from personagraph.errors import PersonagraphError
from personagraph.models.client import ModelClient
from personagraph.runs.eval import EvalConfig
from personagraph.runs.eval import run as run_eval
from personagraph.runs.executors import get_executor, local
from personagraph.schemas import Persona
from personagraph.store import RunStore

PERSONAS = [
    Persona(description="A 70-year-old retired cowboy from Texas"),
    Persona(description="A 36-year-old environmental lawyer from Sydney"),
]


def config(**overrides) -> EvalConfig:
    base = dict(
        personas=PERSONAS,
        models=["test:agent"],
        judges=["test:judge"],
        generator="test:gen",
        environments=2,
        questions_per_task=1,
        concurrency=4,
    )
    return EvalConfig(**{**base, **overrides})


def rows(run_dir: Path, kind: str) -> list[dict]:
    return sorted(RunStore(run_dir).records(kind), key=lambda r: str(sorted(r.items())))


def test_unknown_executor_and_stray_address_are_one_line_errors() -> None:
    with pytest.raises(PersonagraphError, match="--executor 'spark': unknown"):
        get_executor("spark")
    with pytest.raises(PersonagraphError, match="--ray-address needs --executor ray"):
        get_executor("local", address="auto")


async def test_local_executor_marks_units_done_and_skips_them(run_dir: Path) -> None:
    first = await run_eval(config(), run_dir)
    assert first.executor == "local" and first.personas_finished == 2
    assert len(RunStore(run_dir).records("unit_done")) == 2
    second = await run_eval(config(), run_dir)
    assert second.llm_calls == 0 and second.cache_hits == 0  # finished units are not even replayed
    assert second.models == first.models


async def test_a_batch_run_leaves_the_persona_scores_to_its_summary(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The graph's per-persona scores are for Studio; a run's summary is built from the store, so the
    executor's graphs never compute them (a bootstrap CI per task and persona)."""
    from personagraph.graphs import persona_eval

    def not_in_a_batch_run(*args: Any, **kwargs: Any) -> dict[str, Any]:
        raise AssertionError("a batch run computed a persona's scores in its graph")

    monkeypatch.setattr(persona_eval, "persona_scores", not_in_a_batch_run)
    summary = await run_eval(config(), run_dir)
    assert summary.personas_finished == 2 and not summary.failures
    assert summary.models["test:agent"]["persona_score"] is not None


async def test_the_first_units_send_their_calls_before_the_last_ones_start(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Units are let in one per turn of the event loop: with every place open at once, all 40 units took
    each step of their start before any sent its first call."""
    started: list[str] = []
    at_first_call: list[int] = []
    run_unit, send = local.run_unit, ModelClient._send

    async def starting(graph: Any, context: Any, persona: Persona, *args: Any, **kwargs: Any) -> None:
        started.append(persona.id)
        await run_unit(graph, context, persona, *args, **kwargs)

    async def sending(self: ModelClient, *args: Any) -> Any:
        at_first_call.append(len(started))
        return await send(self, *args)

    monkeypatch.setattr(local, "run_unit", starting)
    monkeypatch.setattr(ModelClient, "_send", sending)
    people = [Persona(description=f"A baker from town {i}") for i in range(40)]
    summary = await run_eval(config(personas=people, concurrency=40, environments=1), run_dir)
    assert summary.personas_finished == 40 and len(started) == 40
    assert at_first_call[0] < 20  # 11 on a turn each; all 40 when they all start at once


async def test_ray_results_equal_local_and_resume_the_same_way(ray_cluster, tmp_path: Path) -> None:
    local = await run_eval(config(), tmp_path / "local")
    on_ray = await run_eval(config(), tmp_path / "ray", executor="ray")
    assert on_ray.executor == "ray" and on_ray.personas_finished == 2 and not on_ray.failures
    assert on_ray.models == local.models
    assert on_ray.llm_calls == local.llm_calls and on_ray.roles == local.roles
    for kind in ("selection", "question", "answer", "exemplars", "verdict", "item_score"):
        assert rows(tmp_path / "ray", kind) == rows(tmp_path / "local", kind), kind
    # one store: every call the workers made is in the driver's run directory, once
    db = sqlite3.connect(tmp_path / "ray" / "run.sqlite")
    assert db.execute("SELECT count(*) FROM calls").fetchone()[0] == local.llm_calls
    # a run cut short (units not marked done) resumes from the response cache: no call is sent again
    db.execute("DELETE FROM records WHERE kind = 'unit_done'")
    db.commit()
    db.close()
    resumed = await run_eval(config(), tmp_path / "ray", executor="ray")
    assert resumed.llm_calls == 0 and resumed.cache_hits == local.llm_calls
    assert resumed.models == local.models


async def test_r5_only_the_units_in_flight_exist_as_tasks(run_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Queued personas are no tasks: memory and the time to act on a signal do not grow with the queue."""
    import asyncio

    tasks_at_start: list[int] = []
    real = local.run_unit

    async def counted(*args: Any, **kwargs: Any) -> Any:
        tasks_at_start.append(len(asyncio.all_tasks()))
        return await real(*args, **kwargs)

    monkeypatch.setattr(local, "run_unit", counted)
    personas = [Persona(description=f"A farmer number {i} from Iowa") for i in range(60)]
    summary = await run_eval(config(personas=personas, concurrency=2, environments=1), run_dir)
    assert summary.personas_finished == 60 and len(tasks_at_start) == 60
    assert max(tasks_at_start) <= 20  # the run's own tasks and two units' graphs, never one per queued persona


async def test_r6_a_lost_store_actor_is_one_line_and_rays_messages_stay_off_the_terminal(
    ray_cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    import os

    from personagraph.runs.executors import distributed

    class LostStore(distributed.StoreActor):
        def take_items(self) -> list[str]:
            os._exit(1)  # the actor's process ends, as when its node or a Ray process is lost

    monkeypatch.setattr(distributed, "StoreActor", LostStore)
    with pytest.raises(PersonagraphError, match=r"^the Ray cluster lost a node or actor this run needed \(\w+\); "
                                                r"finished items are saved — run the same command again to resume$"):
        await run_eval(config(), tmp_path / "ray", executor="ray")
    shown = capfd.readouterr()
    assert "(raylet)" not in shown.out + shown.err
