"""``simulate``, ``chat`` and ``judge-session`` at the command line, and ``--agent module:attr`` for every
plug-in kind in both ``eval`` and ``simulate`` (offline, test models)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from personagraph.cli import app
from personagraph.models.testing import register_script

ROOT = Path(__file__).resolve().parents[2]
PERSONA = "A 70-year-old retired cowboy from Texas"
TEST_MODELS = ["--user-model", "test:cli-user", "--judge", "test:cli-judge"]
PLUGINS = [
    "examples.function_agent:agent",
    "examples.function_agent:async_agent",
    "examples.chat_model_agent:model",
    "examples.react_agent:graph",
    "examples.system_prompt_agent:agent",
    "examples.system_prompt_agent:chain",
]


def invoke(*args: str, input: str | None = None):
    return CliRunner().invoke(app, ["-q", *args], input=input)


@pytest.fixture
def from_repo_root(monkeypatch: pytest.MonkeyPatch) -> None:
    """Run as a user would from the repository root; the examples use the test model."""
    monkeypatch.setenv("PERSONAGRAPH_EXAMPLE_MODEL", "test:example")
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", str(ROOT))])
    for name in [m for m in sys.modules if m == "examples" or m.startswith("examples.")]:
        monkeypatch.delitem(sys.modules, name)


def test_simulate_writes_transcripts_and_summary(run_dir):
    result = invoke(
        "simulate",
        "--persona",
        PERSONA,
        "--model",
        "test:cli-agent",
        *TEST_MODELS,
        "--turns",
        "2",
        "--sessions",
        "2",
        "--run-dir",
        str(run_dir),
    )
    assert result.exit_code == 0, result.output
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["kind"] == "simulate" and summary["overall"]["finished"] == 2
    assert all(s["agent_turns"] == 2 for s in summary["sessions"])
    for s in summary["sessions"]:
        assert (run_dir / "transcripts" / f"{s['id']}.jsonl").is_file()
        assert (run_dir / "transcripts" / f"{s['id']}.md").is_file()
    assert "Sessions (scores 1–5)" in result.output

    again = invoke(
        "simulate",
        "--persona",
        PERSONA,
        "--model",
        "test:cli-agent",
        *TEST_MODELS,
        "--turns",
        "2",
        "--sessions",
        "2",
        "--run-dir",
        str(run_dir),
    )
    assert again.exit_code == 0 and "LLM calls this run: 0" in again.output


def test_simulate_adversarial_records_levels(run_dir):
    result = invoke(
        "simulate",
        "--persona",
        PERSONA,
        "--model",
        "test:refuser",
        *TEST_MODELS,
        "--turns",
        "3",
        "--adversarial",
        "--run-dir",
        str(run_dir),
    )
    assert result.exit_code == 0, result.output
    session = json.loads((run_dir / "summary.json").read_text())["sessions"][0]
    assert session["adversarial"] and session["break"]["turn"] == 1 and session["break"]["level"] == 1


@pytest.mark.parametrize("plugin", PLUGINS)
def test_plugin_agent_in_simulate(from_repo_root, run_dir, plugin):
    result = invoke(
        "simulate",
        "--persona",
        PERSONA,
        "--agent",
        plugin,
        *TEST_MODELS,
        "--turns",
        "2",
        "--run-dir",
        str(run_dir),
    )
    assert result.exit_code == 0, result.output
    session = json.loads((run_dir / "summary.json").read_text())["sessions"][0]
    assert (
        session["agent"] == plugin and session["agent_turns"] == 2 and session["stop_reason"] == "max_turns"
    )


@pytest.mark.parametrize("plugin", PLUGINS)
def test_plugin_agent_in_eval(from_repo_root, run_dir, plugin):
    result = invoke(
        "eval",
        "--persona",
        PERSONA,
        "--agent",
        plugin,
        "--judge",
        "test:cli-judge",
        "--quick",
        "--run-dir",
        str(run_dir),
    )
    assert result.exit_code == 0, result.output
    summary = json.loads((run_dir / "summary.json").read_text())
    assert list(summary["models"]) == [plugin]
    assert summary["models"][plugin]["persona_score"] is not None


def test_plugin_on_the_user_side(from_repo_root, run_dir):
    result = invoke(
        "simulate",
        "--persona",
        PERSONA,
        "--model",
        "test:cli-agent",
        "--user-agent",
        "examples.function_agent:agent",
        "--judge",
        "test:cli-judge",
        "--turns",
        "2",
        "--run-dir",
        str(run_dir),
    )
    assert result.exit_code == 0, result.output
    session = json.loads((run_dir / "summary.json").read_text())["sessions"][0]
    assert session["user"] == "examples.function_agent:agent" and session["agent_turns"] == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--model", "test:a", "--agent", "examples.function_agent:agent"], "either --model or --agent"),
        (["--agent", "examples.nope:agent"], "no module named 'examples.nope'"),
        (["--agent", "examples.function_agent:nope"], "has no attribute 'nope'"),
        (["--model", "test:cli-judge"], "judge test:cli-judge is also the agent's model"),
        (["--model", "nope:x"], "unknown provider"),
        (["--model", "test:a", "--checkpoint-url", "mysql://u:secret@h/db"], "expected postgresql://"),
        (["--model", "test:a", "--turns", "0"], "Invalid value"),
        (["--model", "test:a", "--no-judge", "--judge", "test:j"], "either --judge or --no-judge"),
    ],
)
def test_simulate_errors_are_one_line(from_repo_root, run_dir, args, message):
    result = invoke(
        "simulate",
        "--persona",
        PERSONA,
        "--user-model",
        "test:cli-user",
        "--judge",
        "test:cli-judge",
        *args,
        "--run-dir",
        str(run_dir),
    )
    assert result.exit_code == 2
    assert message in " ".join(result.output.split())
    assert "secret" not in result.output and "Traceback" not in result.output


def test_postgres_checkpointer_errors_are_one_line_without_the_password(run_dir):
    result = invoke(
        "simulate",
        "--persona",
        PERSONA,
        "--model",
        "test:a",
        *TEST_MODELS,
        "--run-dir",
        str(run_dir),
        "--checkpoint-url",
        "postgresql://u:secret@127.0.0.1:1/db",
    )
    assert result.exit_code == 2
    try:
        import langgraph.checkpoint.postgres  # noqa: F401
    except ImportError:
        assert "needs langgraph-checkpoint-postgres" in result.output
    else:
        assert "cannot connect" in result.output and "postgresql://[redacted]@127.0.0.1:1" in result.output
    assert "secret" not in result.output and "Traceback" not in result.output


def test_simulate_without_judges(run_dir):
    result = invoke(
        "simulate",
        "--persona",
        PERSONA,
        "--model",
        "test:cli-agent",
        "--user-model",
        "test:cli-user",
        "--no-judge",
        "--turns",
        "2",
        "--run-dir",
        str(run_dir),
    )
    assert result.exit_code == 0, result.output
    session = json.loads((run_dir / "summary.json").read_text())["sessions"][0]
    assert session["task_means"] == {} and session["agent_turns"] == 2


def test_chat_then_judge_session(run_dir, tmp_path):
    result = invoke(
        "chat",
        "--persona",
        PERSONA,
        "--model",
        "test:cli-agent",
        "--run-dir",
        str(run_dir),
        input="Howdy! Where are you from?\nWhat's your horse called?\n/quit\n",
    )
    assert result.exit_code == 0, result.output
    assert result.output.count("agent>") == 2
    transcript = next((run_dir / "transcripts").glob("chat-*.jsonl"))
    lines = [json.loads(x) for x in transcript.read_text().splitlines()]
    assert lines[0]["type"] == "header" and lines[0]["persona"] == PERSONA and lines[0]["user"] == "human"
    assert [x["text"] for x in lines if x.get("role") == "user"][:2] == [
        "Howdy! Where are you from?",
        "What's your horse called?",
    ]
    judged = tmp_path / "judged"
    result = invoke("judge-session", str(transcript), "--judge", "test:cli-judge", "--run-dir", str(judged))
    assert result.exit_code == 0, result.output
    summary = json.loads((judged / "summary.json").read_text())
    assert summary["sessions"][0]["agent_turns"] == 2
    assert set(summary["sessions"][0]["task_means"]) == {"Persona Consistency", "Linguistic Habits"}
    assert "Agent turns" in result.output

    refused = invoke("judge-session", str(transcript), "--judge", "test:cli-agent", "--run-dir", str(judged))
    assert refused.exit_code == 2 and "also the agent's model" in refused.output


def test_a_reply_cut_at_the_token_limit_is_said_in_chat_and_under_the_sessions_table(run_dir, tmp_path):
    register_script("cli-long-winded", lambda messages, schema: "I rode the range for forty years " * 10)
    chatted = invoke("chat", "--persona", PERSONA, "--model", "test:cli-long-winded", "--max-tokens", "16",
                     "--run-dir", str(run_dir), input="Howdy!\n/quit\n")
    assert chatted.exit_code == 0, chatted.output
    assert "(cut off at the 16-token limit: --max-tokens raises it)" in chatted.output
    transcript = next((run_dir / "transcripts").glob("chat-*.jsonl"))
    judged = invoke("judge-session", str(transcript), "--judge", "test:cli-judge", "--run-dir",
                    str(tmp_path / "judged"))
    assert judged.exit_code == 0, judged.output
    assert "1 of 1 agent turns cut at the token limit" in " ".join(judged.output.split())  # wrapped to the table
    whole = invoke("chat", "--persona", PERSONA, "--model", "test:cli-agent", "--run-dir",
                   str(tmp_path / "whole"), input="Howdy!\n/quit\n")
    assert whole.exit_code == 0 and "cut off" not in whole.output


def test_chat_ends_at_end_of_input(run_dir):
    result = invoke(
        "chat",
        "--persona",
        PERSONA,
        "--model",
        "test:cli-agent",
        "--run-dir",
        str(run_dir),
        input="Just one question?\n",
    )
    assert result.exit_code == 0, result.output
    assert "stop: user_stop" in result.output


def test_judge_session_missing_file(tmp_path):
    result = invoke(
        "judge-session", str(tmp_path / "nope.jsonl"), "--judge", "test:j", "--run-dir", str(tmp_path)
    )
    assert result.exit_code == 2 and "nope.jsonl: no such file" in result.output


def test_a_plugin_without_its_configuration_stops_with_the_line_that_sets_it(tmp_path, monkeypatch) -> None:
    """The memory agent as a plug-in needs PERSONAGRAPH_MEMORY_MODEL: without it the command exits 2 with the
    line that sets it, not 3 with failed turns and a promise that running it again helps."""
    monkeypatch.delenv("PERSONAGRAPH_MEMORY_MODEL", raising=False)
    result = invoke("simulate", "--persona", PERSONA, "--agent", "personagraph.graphs.memory_dialogue:agent",
                    *TEST_MODELS, "--turns", "2", "--run-dir", str(tmp_path / "run"))
    assert result.exit_code == 2, result.output
    assert "export PERSONAGRAPH_MEMORY_MODEL=" in result.output and "run the same command again" not in result.output
