"""The graphs as LangGraph Studio runs them: settings as the run's context, the persona as the input.

The server test starts the real in-memory dev server (``langgraph dev``, from the ``studio``/``dev``
extras) on a free loopback port and drives it through its HTTP API, as Studio does.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from personagraph.cli import app
from personagraph.models.testing import register_script
from personagraph.schemas import TASK_NAMES
from personagraph.store import RunStore
from personagraph.studio import EvalSettings, memory_dialogue, persona_eval, session

ROOT = Path(__file__).resolve().parents[1]
COWBOY = "A 70-year-old retired cowboy from Texas"
EVAL_CONTEXT = {"models": ["test:agent"], "judges": ["test:j1"], "generator": "test:gen",
                "environments": 2, "questions_per_task": 1}

register_script("studio-user", lambda messages, schema: "Tell me about your day, partner?")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A running ``langgraph dev`` on this repository's langgraph.json; always stopped afterwards."""
    port = _free_port()
    cwd = tmp_path_factory.mktemp("langgraph-dev")  # the in-memory server keeps its files in its cwd
    command = [str(Path(sys.executable).with_name("langgraph")), "dev", "--no-browser", "--no-reload",
               "--allow-blocking", "--port", str(port), "--config", str(ROOT / "langgraph.json")]
    env = {**os.environ, "LANGSMITH_TRACING": "false", "LANGGRAPH_CLI_NO_ANALYTICS": "1"}
    log = (cwd / "server.log").open("wb")
    process = subprocess.Popen(command, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{url}/ok", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail("langgraph dev did not start:\n" + (cwd / "server.log").read_text()[-3000:])
            time.sleep(0.5)
        yield url
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()


def _run(url: str, graph: str, payload: dict) -> tuple[dict, list[str]]:
    """Creates a thread, runs ``graph`` on it to the end; returns the final state and the nodes run."""
    with httpx.Client(base_url=url, timeout=120) as client:
        thread = client.post("/threads", json={}).json()["thread_id"]
        final = client.post(f"/threads/{thread}/runs/wait", json={"assistant_id": graph, **payload}).json()
        assert "__error__" not in final, final
        history = client.post(f"/threads/{thread}/history", json={"limit": 100}).json()
    steps = [name for snapshot in reversed(history) for name in snapshot.get("next", [])]
    return final, [name for name in steps if name != "__start__"]


FORMS = {  # graph → (the input form's fields, the required ones, the output's fields)
    "persona_eval": ({"persona"}, {"persona"}, {"persona_id", "scores"}),
    "session": ({"persona", "max_turns", "scenario", "user_persona", "adversarial"}, {"persona"},
                {"session_id", "turns", "stop_reason", "result"}),
    "memory_dialogue": ({"user_id", "messages", "user_name", "date"}, {"user_id", "messages"},
                        {"reply", "chosen", "candidates", "status", "error"}),
}


def test_the_dev_server_gives_every_graph_a_form_of_what_a_person_fills(server):
    """Studio draws a graph's input form from its input schema and shows its output schema: the fields a
    person fills (required ones marked), not the graph's whole internal state, and the scores out; the
    models, judges and options are the context form's."""
    graphs = json.loads((ROOT / "langgraph.json").read_text(encoding="utf-8"))["graphs"]
    assert set(graphs) == set(FORMS)
    with httpx.Client(base_url=server, timeout=60) as client:
        for graph, (fields, required, output) in FORMS.items():
            (assistant,) = client.post("/assistants/search", json={"graph_id": graph}).json()
            schemas = client.get(f"/assistants/{assistant['assistant_id']}/schemas").json()
            assert set(schemas["input_schema"]["properties"]) == fields, (graph, schemas["input_schema"])
            assert set(schemas["input_schema"]["required"]) == required, graph
            assert set(schemas["output_schema"]["properties"]) == output, (graph, schemas["output_schema"])
            assert schemas["context_schema"]["properties"], (graph, schemas)
    assert {"models", "judges"} <= set(persona_eval.get_context_jsonschema()["properties"])


def test_the_dev_server_runs_the_persona_eval_graph_to_the_end(server, tmp_path):
    run_dir = tmp_path / "studio"
    final, steps = _run(server, "persona_eval",
                        {"input": {"persona": COWBOY}, "context": {**EVAL_CONTEXT, "run_dir": str(run_dir)}})
    assert set(final) == {"persona_id", "scores"}  # the output: what a person reads, not the internal state
    assert final["persona_id"].startswith("a-70-year-old-retired")
    assert steps[0] == "start" and "evaluate_task" in steps and steps[-1] == "aggregate"
    # the result a run reports, in the final state: per task, PersonaScore, refusal rate, failed items
    scores = final["scores"]["models"]["test:agent"]
    assert set(scores["tasks"]) == set(TASK_NAMES) and 1 <= scores["persona_score"] <= 5
    assert scores["refusal_rate"] is not None and final["scores"]["failures"] == []
    # and in the run directory, as `personagraph view` shows it
    shown = CliRunner().invoke(app, ["view", str(run_dir)], env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    assert "PersonaScore" in shown.output and f"{scores['persona_score']:.2f}" in shown.output
    # while the server holds the directory, view says so (not a command that was interrupted)
    said = " ".join(shown.output.split())  # the line wraps at the terminal's width
    assert "is open in a LangGraph Studio server" in said and "stop the server to close it" in said


def test_runs_with_other_settings_are_refused_a_directory_that_holds_runs(server, tmp_path):
    """Two contexts sharing a run_dir would mix their numbers (and leave view with an unexplained
    'incomplete'): the second is refused with what differs and what to do."""
    context = {**EVAL_CONTEXT, "run_dir": str(tmp_path / "shared")}
    _run(server, "persona_eval", {"input": {"persona": COWBOY}, "context": context})
    with httpx.Client(base_url=server, timeout=120) as client:
        thread = client.post("/threads", json={}).json()["thread_id"]
        final = client.post(f"/threads/{thread}/runs/wait", json={
            "assistant_id": "persona_eval", "input": {"persona": "A pediatric nurse"},
            "context": {**context, "questions_per_task": 2}}).json()
    error = json.dumps(final)
    assert "holds runs with other settings" in error and "questions_per_task: 1 there, 2 here" in error
    assert "give these settings a run_dir of their own" in error


def test_the_dev_server_runs_the_session_graph_to_the_end(server):
    final, steps = _run(server, "session", {
        "input": {"persona": COWBOY, "max_turns": 2},
        # an older client's configurable works as well as context
        "config": {"configurable": {"agent": "test:agent", "user": "test:studio-user",
                                    "judges": ["test:j1", "test:agent"]}},
    })
    assert final["stop_reason"] == "max_turns" and len(final["turns"]) == 4
    assert set(final["turns"][1]["scores"]) == {"test:j1"}  # the agent's own model never judges it
    assert final["result"]["status"] == "finished"
    assert steps[:3] == ["start", "user", "agent"] and steps[-1] == "verdict"


def test_the_context_form_has_a_default_for_every_field():
    schema = persona_eval.get_context_jsonschema()
    assert set(schema["properties"]) == {"models", "judges", "generator", "environments", "shortlist",
                                         "questions_per_task", "run_dir"}
    assert not schema.get("required")
    assert not session.get_context_jsonschema().get("required")


async def test_settings_with_a_run_dir_keep_the_run_there_and_share_one_store(tmp_path):
    context = {**EVAL_CONTEXT, "run_dir": str(tmp_path / "studio")}
    first = await persona_eval.ainvoke({"persona": COWBOY}, context=context)
    again = await persona_eval.ainvoke({"persona": COWBOY}, context=context)
    assert EvalSettings(**context).live() is EvalSettings(**context).live()
    assert again["scores"] == first["scores"] and set(first) == {"persona_id", "scores"}
    store = RunStore(tmp_path / "studio", readonly=True, lock=False)
    try:
        assert len(list(store.records("verdict"))) == 5
        assert sum(row["calls"] for row in store.call_stats()) > 0
    finally:
        store.close()


async def test_a_graph_without_a_context_says_what_it_needs():
    with pytest.raises(TypeError, match="context must be a EvalContext or settings that build one"):
        await persona_eval.ainvoke({"persona": COWBOY})


async def test_the_memory_dialogue_graph_runs_from_settings(tmp_path):
    out = await memory_dialogue.ainvoke(
        {"user_id": "bart", "messages": [{"role": "user", "content": "I miss the beach trip we took."}]},
        context={"model": "test:agent", "memories": str(tmp_path / "bank")},
    )
    assert out["status"] == "ok" and out["reply"]
    assert out["candidates"] == [] and out["chosen"] is None  # an empty bank: nothing to recall
