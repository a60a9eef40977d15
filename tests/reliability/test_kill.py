"""kill -9 half-way through `personagraph eval` against an OpenAI-compatible server, then the same command."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from bench._harness import fake_server
from bench.fake_openai import body_key

PERSONAS = ["A 70-year-old retired cowboy from Texas", "A 36-year-old environmental lawyer from Sydney",
            "A 19-year-old chess player from Chennai"]


def _finished(run_dir: Path) -> list[tuple[str, str]]:
    """(model, request) of each finished call (a read-write connection recovers a killed writer's WAL)."""
    if not (run_dir / "run.sqlite").exists():
        return []
    try:
        db = sqlite3.connect(run_dir / "run.sqlite", timeout=10)
        try:
            return db.execute("SELECT model, request FROM calls").fetchall()
        finally:
            db.close()
    except sqlite3.Error:
        return []


def _server_key(model: str, request: str) -> str:
    """The fake server's key for the body a stored call was sent with."""
    data = json.loads(request)
    return body_key({"model": model.split(":", 1)[1], "messages": data["messages"],
                     "response_format": data["params"].get("response_format")})


def test_kill_9_then_same_command_completes_with_equal_scores_and_no_repeat(tmp_path: Path) -> None:
    with fake_server(delay=0.15) as server:
        command = [sys.executable, "-m", "personagraph.cli", "-q", "eval", "--model", "openai:agent",
                   "--judge", "openai:judge", "--generator", "openai:gen", "--environments", "2",
                   "--questions-per-task", "1", "--concurrency", "3", "--base-url", server.base_url]
        for persona in PERSONAS:
            command += ["--persona", persona]
        env = {**os.environ, "OPENAI_API_KEY": "sk-kill-test"}
        reference = tmp_path / "reference"
        subprocess.run([*command, "--run-dir", str(reference)], check=True, capture_output=True, timeout=120,
                       env=env)
        total = len(_finished(reference))

        killed = tmp_path / "killed"
        process = subprocess.Popen([*command, "--run-dir", str(killed)], stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, env=env)
        deadline = time.time() + 90
        while len(_finished(killed)) < total // 2 and time.time() < deadline:
            time.sleep(0.02)
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        before = _finished(killed)
        assert 0 < len(before) < total

        server.reset()
        done = subprocess.run([*command, "--run-dir", str(killed)], capture_output=True, text=True, timeout=120,
                              env=env)
        assert done.returncode == 0, done.stderr
        sent_again = set(server.stats()["attempts"])
    resumed = json.loads((killed / "summary.json").read_text())
    expected = json.loads((reference / "summary.json").read_text())
    assert resumed["personas_finished"] == len(PERSONAS)
    assert resumed["models"] == expected["models"]  # the same scores as the uninterrupted run
    assert len(_finished(killed)) == total
    # no finished call was repeated: by the run's own count and by what the server received
    assert resumed["llm_calls"] == total - len(before)
    assert not sent_again & {_server_key(model, request) for model, request in before}
