"""The embedded engine killed in the middle of `personagraph eval` (SIGKILL, SIGSEGV), on a fake llama-server:
one death → restarted, the run finishes with the scores of an undisturbed run; two deaths → the CLI stops
with one line; the same command then finishes, leaves the finished items as they were and sends no
finished call again."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result
from typer.testing import CliRunner

from bench.fake_openai import body_key
from personagraph.cli import app
from personagraph.models import engine as engine_module
from personagraph.models.engine import engine_for
from tests.models.fake_llama_server import use_fake_engine

GENERATOR = "qwen2.5-coder-1.5b"  # the default generator and judge: most of the run's calls
EVAL = ["eval", "--persona", "A 70-year-old retired cowboy from Texas", "--environments", "2",
        "--questions-per-task", "1"]


@pytest.fixture
def fake_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    use_fake_engine(tmp_path, monkeypatch)
    monkeypatch.setenv("FAKE_ENGINE_DELAY", "0.3")
    yield
    engine_module.stop_engines()


def run_eval(run_dir: Path) -> Result:
    return CliRunner().invoke(app, [*EVAL, "--run-dir", str(run_dir)], env={"COLUMNS": "200"})


def rows(run_dir: Path, query: str) -> list[tuple[Any, ...]]:
    """Rows of the run store, [] while it does not exist yet (a read-write connection sees the WAL)."""
    if not (run_dir / "run.sqlite").exists():
        return []
    try:
        db = sqlite3.connect(run_dir / "run.sqlite", timeout=10)
        try:
            return db.execute(query).fetchall()
        finally:
            db.close()
    except sqlite3.Error:
        return []


def kill_generator_engine(run_dir: Path, signals: list[signal.Signals], after_calls: int) -> threading.Thread:
    """Kills the generator's engine once per signal, each time after the run stored ``after_calls`` more
    calls and the engine (re)started."""

    def killer() -> None:
        engine = engine_for(GENERATOR)
        deadline = time.monotonic() + 60
        for number, sig in enumerate(signals, 1):
            while time.monotonic() < deadline and (
                len(rows(run_dir, "SELECT key FROM calls")) < after_calls * number or engine.pid is None
            ):
                time.sleep(0.02)
            if engine.pid is not None:
                os.kill(engine.pid, sig)
                while engine.pid is not None and time.monotonic() < deadline:  # until the death is seen
                    time.sleep(0.01)

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    return thread


def server_attempts(name: str) -> dict[str, int]:
    """The request bodies a running (fake) engine received, by fake_openai's body key."""
    base = engine_module._engines[name]._url.removesuffix("/v1")
    with urllib.request.urlopen(base + "/stats", timeout=10) as reply:
        return json.loads(reply.read())["attempts"]


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSEGV], ids=["SIGKILL", "SIGSEGV"])
def test_one_engine_death_mid_run_is_survived_with_unchanged_scores(
    sig: signal.Signals, fake_engine: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reference = run_eval(tmp_path / "reference")
    assert reference.exit_code == 0, reference.output
    engine_module.stop_engines()
    monkeypatch.setattr(engine_module, "_engines", {})  # a new process: new engines
    killer = kill_generator_engine(tmp_path / "killed", [sig], after_calls=4)
    result = run_eval(tmp_path / "killed")
    killer.join(10)
    assert result.exit_code == 0, result.output
    assert engine_for(GENERATOR).deaths == [sig.name]
    summary = json.loads((tmp_path / "killed" / "summary.json").read_text())
    expected = json.loads((tmp_path / "reference" / "summary.json").read_text())
    assert summary["personas_finished"] == 1 and summary["models"] == expected["models"]


def test_two_deaths_stop_the_cli_with_one_line_and_the_same_command_resumes(
    fake_engine: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = tmp_path / "run"
    killer = kill_generator_engine(run_dir, [signal.SIGKILL, signal.SIGSEGV], after_calls=3)
    stopped = run_eval(run_dir)
    killer.join(10)
    assert stopped.exit_code == 2, stopped.output
    lines = [line for line in stopped.output.splitlines() if line.strip()]
    log = engine_for(GENERATOR).log_path
    assert lines[-1] == (f"error: local:{GENERATOR}: the llama.cpp engine died twice (SIGKILL, SIGSEGV); "
                         f"see {log}"), stopped.output
    assert "Traceback" not in stopped.output and log.is_file()
    calls_before = rows(run_dir, "SELECT key, model, request, text FROM calls")
    records_before = rows(run_dir, "SELECT kind, id, data FROM records")
    assert calls_before

    engine_module.stop_engines()
    monkeypatch.setattr(engine_module, "_engines", {})  # the same command in a new process
    resumed = run_eval(run_dir)
    assert resumed.exit_code == 0, resumed.output
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["personas_finished"] == 1
    calls_after = rows(run_dir, "SELECT key, model, request, text FROM calls")
    assert set(calls_before) <= set(calls_after)  # finished calls unchanged
    assert summary["llm_calls"] == len(calls_after) - len(calls_before)  # none of them sent again
    assert set(records_before) <= set(rows(run_dir, "SELECT kind, id, data FROM records"))
    sent_again = set(server_attempts(GENERATOR)) | set(server_attempts("qwen2.5-coder-0.5b"))
    finished = {body_key({"model": model.split(":", 1)[1], "messages": json.loads(request)["messages"],
                          "response_format": json.loads(request)["params"].get("response_format")})
                for _, model, request, _ in calls_before}
    assert not sent_again & finished
