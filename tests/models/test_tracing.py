"""Every model call is a LangSmith LLM run under the graph node that made it (a local collector stands in
for LangSmith): over HTTP (``openai@…:``), in process (``test:``), from the cache, embedded (``local:``:
through the engine on a fake llama-server, and on the real one in the ``embedded`` test)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import langsmith
import pytest
from fake_llama_server import fake_server_binary
from langsmith_collector import Collector

from bench.fake_openai import start_in_thread
from personagraph.models import ModelClient
from personagraph.models.engine import SERVER_ENV
from personagraph.store import RunStore

ROOT = Path(__file__).resolve().parents[2]
NODES = {
    "select",
    "evaluate_task",
}  # the graph's nodes that call models (evaluate_task: questions, exemplars, answers and their verdicts)


# The CLI with the embedded models' weights stubbed out: with $PERSONAGRAPH_LLAMA_SERVER on the fake
# llama-server, ``local:`` calls take their real path (engine, OpenAI-compatible HTTP) without a model.
FAKE_WEIGHTS_CLI = (
    "from pathlib import Path; from personagraph.models import engine; "
    "engine.ensure_weights = lambda model: Path(model.name + '.gguf'); "
    "from personagraph.cli import main; main()"
)


def _traced(
    collector: Collector, *args: str, python: tuple[str, ...] = ("-m", "personagraph.cli"), **env_vars: str
) -> subprocess.CompletedProcess[str]:
    """The CLI with ``args`` in a process that traces to ``collector`` (``python``: how it is started)."""
    env = {
        **os.environ,
        "LANGSMITH_TRACING": "true",
        "LANGSMITH_ENDPOINT": collector.url,
        "LANGSMITH_API_KEY": "lsv2-test-key",
        "LANGSMITH_PROJECT": "personagraph-test",
        "PYTHONPATH": str(ROOT),
        **env_vars,
    }
    env.pop("OPENAI_API_KEY", None)
    return subprocess.run(
        [sys.executable, *python, *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _llm_runs_by_node(collector: Collector) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    runs = collector.runs
    llm = collector.of_type("llm")
    return llm, {run["id"]: runs.get(str(run.get("parent_run_id")), {}) for run in llm}


def test_every_model_call_of_an_eval_is_one_llm_run_under_its_node(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    with start_in_thread() as server, Collector() as collector:
        command = [
            "eval",
            "--persona",
            "A 70-year-old retired cowboy from Texas",
            "-m",
            "openai@fake:agent",
            "-j",
            "test:j1",
            "--environments",
            "1",
            "--questions-per-task",
            "1",
            "--run-dir",
            str(run_dir),
            "--endpoint",
            f"fake={server.base_url}",
        ]
        first = _traced(collector, *command)
        assert first.returncode == 0, first.stderr
        summary = json.loads((run_dir / "summary.json").read_text())
        llm, parents = _llm_runs_by_node(collector)
        assert len(llm) == summary["llm_calls"] + summary["cache_hits"] > 0  # one run per call, no more
        by_model = {
            m: [r for r in llm if r["extra"]["metadata"]["ls_model_name"] == m] for m in ("agent", "j1")
        }
        assert len(by_model["agent"]) == server.stats().completions > 0  # the HTTP path is traced
        assert len(by_model["j1"]) == len(llm) - len(by_model["agent"]) > 0  # the in-process test: model too
        for run in llm:
            meta = run["extra"]["metadata"]
            assert parents[run["id"]].get("name") in NODES, (run["name"], parents[run["id"]].get("name"))
            assert meta["role"] in run["tags"] and meta["cache_hit"] is False
            assert meta["ls_provider"] == ("openai" if meta["ls_model_name"] == "agent" else "test")
            usage = run["outputs"]["usage_metadata"]
            assert (
                usage["input_tokens"] > 0
                and usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
            )
            assert run["start_time"] and run["end_time"]  # LangSmith's latency
        roles = {(parents[r["id"]]["name"], r["extra"]["metadata"]["role"]) for r in llm}
        assert roles == {("select", "env_selector"), ("evaluate_task", "question_gen"),
                         ("evaluate_task", "persona"), ("evaluate_task", "exemplar_gen"),
                         ("evaluate_task", "judge")}  # every role's calls under the node that makes them
        assert not any(
            run.get("run_type") == "llm" and run["name"].startswith("Scripted")
            for run in collector.runs.values()
        )  # not traced twice through LangChain

        collector.runs.clear()
        again = _traced(collector, *command)  # resumed: a finished run makes no call, so nothing is traced
        assert again.returncode == 0, again.stderr
        assert json.loads((run_dir / "summary.json").read_text())["llm_calls"] == 0 and not collector.of_type(
            "llm"
        )


def test_every_local_call_of_an_eval_is_one_llm_run_under_its_node(tmp_path: Path) -> None:
    """``local:`` agent and judge (the fake llama-server behind the engine): each call is an LLM run under
    the node that made it, with provider ``local``."""
    run_dir = tmp_path / "run"
    agent, judge = "qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"
    with Collector() as collector:
        engine_env = {SERVER_ENV: str(fake_server_binary(tmp_path)), "PERSONAGRAPH_CACHE_DIR": str(tmp_path)}
        done = _traced(
            collector,
            "eval", "--persona", "A 70-year-old retired cowboy from Texas", "-m", f"local:{agent}",
            "-j", f"local:{judge}", "--environments", "1", "--questions-per-task", "1",
            "--run-dir", str(run_dir),
            python=("-c", FAKE_WEIGHTS_CLI),
            **engine_env,
        )
        assert done.returncode == 0, done.stderr
        summary = json.loads((run_dir / "summary.json").read_text())
        llm, parents = _llm_runs_by_node(collector)
        assert len(llm) == summary["llm_calls"] > 0 and summary["cache_hits"] == 0  # one run per call
        with sqlite3.connect(run_dir / "run.sqlite") as db:
            stored = dict(db.execute("SELECT model, count(*) FROM calls GROUP BY model").fetchall())
        names = [r["extra"]["metadata"]["ls_model_name"] for r in llm]
        traced = {f"local:{m}": names.count(m) for m in (agent, judge)}
        assert traced == stored and all(traced.values())  # both engines' calls, each traced once
        for run in llm:
            meta = run["extra"]["metadata"]
            assert meta["ls_provider"] == "local" and meta["cache_hit"] is False
            assert meta["role"] in run["tags"] and run["start_time"] and run["end_time"]
            assert run["outputs"]["usage_metadata"]["input_tokens"] > 0
        roles = {(parents[r["id"]].get("name"), r["extra"]["metadata"]["role"]) for r in llm}
        assert roles == {("select", "env_selector"), ("evaluate_task", "question_gen"),
                         ("evaluate_task", "persona"), ("evaluate_task", "judge")}


async def test_cache_hits_are_traced_as_such_under_the_current_run(run_dir: Path) -> None:
    with Collector() as collector:
        client = langsmith.Client(api_url=collector.url, api_key="lsv2-test-key")
        with langsmith.tracing_context(enabled=True, client=client, project_name="personagraph-test"):
            async with langsmith.trace("node", run_type="chain") as node:
                for _ in range(2):
                    model = ModelClient.create("test:j1", "judge", store=RunStore(run_dir))
                    await model.complete([{"role": "user", "content": "Rate this."}])
        client.flush()
        llm = sorted(collector.of_type("llm"), key=lambda run: run["start_time"])
        assert [run["extra"]["metadata"]["cache_hit"] for run in llm] == [False, True]
        assert all(str(run["parent_run_id"]) == str(node.id) for run in llm)
        assert llm[1]["outputs"]["usage_metadata"] == llm[0]["outputs"]["usage_metadata"]  # the stored counts


@pytest.mark.embedded
def test_an_embedded_model_call_is_traced(tmp_path: Path) -> None:
    with Collector() as collector:
        done = _traced(
            collector,
            "ask",
            "--persona",
            "A pediatric nurse",
            "--model",
            "local:qwen2.5-coder-0.5b",
            "--max-tokens",
            "8",
            "Hello?",
        )
        assert done.returncode == 0, done.stderr
        [run] = collector.of_type("llm")
        assert (
            run["extra"]["metadata"]["ls_provider"] == "local"
            and run["outputs"]["usage_metadata"]["output_tokens"]
        )
