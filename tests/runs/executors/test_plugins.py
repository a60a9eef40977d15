"""Plug-in agents (``module:attr``) on every executor: Ray workers load the paths themselves."""

from __future__ import annotations

import json
import pickle
import sqlite3
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from personagraph.agents.plugin import adapt, load_agent
from personagraph.errors import PersonagraphError
from personagraph.runs.eval import EvalConfig
from personagraph.runs.eval import run as run_eval
from personagraph.runs.plugins import load_plugins
from personagraph.schemas import Persona
from personagraph.store import RunStore

PERSONAS = [
    Persona(description="A 70-year-old retired cowboy from Texas"),
    Persona(description="A 36-year-old environmental lawyer from Sydney"),
]
PLUGIN_SOURCE = textwrap.dedent('''
    import threading


    async def agent(messages):
        """Deterministic: names the persona and echoes the question."""
        persona = messages[0]["content"].split("\\n")[0][:60]
        return f"Speaking as {persona}: {messages[-1]['content'][:80]}"


    class Locked:
        """A callable holding a lock: it does not pickle, so only its path can reach a worker."""

        def __init__(self):
            self.lock = threading.Lock()

        async def __call__(self, messages):
            with self.lock:
                return "Locked: " + messages[-1]["content"][::-1][:80]


    locked = Locked()
''')


def config(models: list[str]) -> EvalConfig:
    return EvalConfig(
        personas=PERSONAS,
        models=models,
        judges=["test:judge"],
        generator="test:gen",
        environments=2,
        questions_per_task=1,
        concurrency=4,
    )


def rows(run_dir: Path, kind: str) -> list[dict]:
    return sorted(RunStore(run_dir).records(kind), key=lambda r: str(sorted(r.items())))


@pytest.fixture
def plugin_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A plug-in module in a temporary directory on this process's sys.path only (not the cwd, not
    installed, not in PYTHONPATH); a fresh name per test, as Ray worker processes outlive tests."""
    name = f"pg_plugin_{uuid.uuid4().hex[:10]}"
    folder = tmp_path / "plugins"
    folder.mkdir()
    source = folder / f"{name}.py"
    source.write_text(PLUGIN_SOURCE)
    monkeypatch.syspath_prepend(str(folder))
    yield source
    sys.modules.pop(name, None)


async def test_plugin_agents_on_ray_equal_local_and_resume_from_the_cache(
    ray_cluster, plugin_module: Path, tmp_path: Path
) -> None:
    paths = [f"{plugin_module.stem}:agent", f"{plugin_module.stem}:locked"]
    with pytest.raises(TypeError):
        pickle.dumps(load_plugins(paths)[1])
    models = ["test:agent", *paths]
    local = await run_eval(config(models), tmp_path / "local")
    on_ray = await run_eval(config(models), tmp_path / "ray", executor="ray")
    assert on_ray.executor == "ray" and on_ray.personas_finished == 2 and not on_ray.failures
    assert list(on_ray.models) == list(local.models) and set(on_ray.models) == set(models)
    assert on_ray.models == local.models
    assert on_ray.llm_calls == local.llm_calls and on_ray.roles == local.roles
    for kind in ("selection", "question", "answer", "exemplars", "verdict", "item_score"):
        assert rows(tmp_path / "ray", kind) == rows(tmp_path / "local", kind), kind
    answers = {(a["model"], a["id"]): a["text"] for a in rows(tmp_path / "ray", "answer")}
    assert all(text.startswith("Speaking as ") for (model, _), text in answers.items() if model == paths[0])
    assert all(text.startswith("Locked: ") for (model, _), text in answers.items() if model == paths[1])
    db = sqlite3.connect(tmp_path / "ray" / "run.sqlite")
    db.execute("DELETE FROM records WHERE kind = 'unit_done'")
    db.commit()
    db.close()
    resumed = await run_eval(config(models), tmp_path / "ray", executor="ray")
    assert resumed.llm_calls == 0 and resumed.cache_hits == local.llm_calls
    assert resumed.models == local.models and not resumed.failures


async def test_a_path_that_does_not_load_on_a_worker_ends_the_run_in_one_line(
    ray_cluster, plugin_module: Path, tmp_path: Path
) -> None:
    path = f"{plugin_module.stem}:agent"
    load_plugins([path])  # the driver has it, as after the CLI loaded it; the workers will not find it
    plugin_module.unlink()
    with pytest.raises(PersonagraphError) as on_ray:
        await run_eval(config([path]), tmp_path / "run", executor="ray")
    del sys.modules[plugin_module.stem]
    with pytest.raises(PersonagraphError) as local:
        load_agent(path)
    assert str(on_ray.value) == f"{local.value} (on a Ray worker)"
    assert "\n" not in str(on_ray.value) and "no module named" in str(on_ray.value)


async def test_agent_objects_run_locally_and_ray_asks_for_their_path(tmp_path: Path) -> None:
    async def inline(messages: list[dict[str, str]]) -> str:
        return "An inline reply."

    agent = adapt(inline, "inline")
    summary = await run_eval(config(["inline"]), tmp_path / "local", agents=[agent])
    assert summary.personas_finished == 2 and summary.models["inline"]["persona_score"] is not None
    with pytest.raises(PersonagraphError, match=r"pass the path instead of the agent object \(inline\)"):
        await run_eval(config(["inline"]), tmp_path / "ray", agents=[agent], executor="ray")


def test_eval_cli_runs_a_plugin_from_the_working_directory_on_ray(
    ray_cluster, plugin_module: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from personagraph.cli import app

    monkeypatch.chdir(plugin_module.parent)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", str(plugin_module.parent))])
    path = f"{plugin_module.stem}:agent"
    result = CliRunner().invoke(
        app,
        [
            "-q",
            "eval",
            "--persona",
            PERSONAS[0].description,
            "--agent",
            path,
            "--judge",
            "test:cli-judge",
            "--generator",
            "test:gen",
            "--environments",
            "2",
            "--questions-per-task",
            "1",
            "--executor",
            "ray",
            "--run-dir",
            str(tmp_path / "run"),
        ],
    )
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["executor"] == "ray" and list(summary["models"]) == [path] and not summary["failures"]
    assert summary["models"][path]["persona_score"] is not None


async def test_an_agent_object_whose_name_is_not_in_models_is_refused(tmp_path: Path) -> None:
    agent = adapt(lambda messages: "A reply.", "inline")
    with pytest.raises(PersonagraphError, match="agents: 'inline' is not in models"):
        await run_eval(config(["test:agent"]), tmp_path / "run", agents=[agent])
