"""A planted API key never reaches the run directory, the logs or the reports."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from bench._harness import fake_server

KEY = "sk-planted-7f3a9c1e5b2d4f6a8c0e1f2a3b4c5d6e"
FLAG_KEY = "sk-flag-0a1b2c3d4e5f60718293a4b5c6d7e8f9"


def _files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def test_planted_key_is_never_written(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    env = {**os.environ, "OPENAI_API_KEY": KEY, "PYTHONUNBUFFERED": "1"}
    outputs = []
    # a key given as a flag, to an endpoint that is down: not in its error messages either. It runs beside
    # the rest (its retries wait most of the time it takes).
    failing = subprocess.Popen(
        [sys.executable, "-m", "personagraph.cli", "-v", "eval", "--persona", "A 70-year-old cowboy",
         "--model", "openai:agent", "--judge", "openai:judge", "--environments", "1", "--questions-per-task",
         "1", "--base-url", "http://127.0.0.1:9/v1", "--api-key", FLAG_KEY,
         "--run-dir", str(tmp_path / "down")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
    )
    try:
        with fake_server(delay=0.0, rate_500=0.2, rate_429=0.1, retry_after=0.05) as server:
            done = subprocess.run(
                [sys.executable, "-m", "personagraph.cli", "-v", "eval", "--persona", "A 70-year-old cowboy",
                 "--model", "openai:agent", "--judge", "openai:judge", "--environments", "1",
                 "--questions-per-task", "1", "--base-url", server.base_url, "--run-dir", str(run_dir)],
                capture_output=True, timeout=120, env=env,
            )
            assert done.returncode == 0, done.stderr.decode()[-2000:]
            outputs += [done.stdout, done.stderr]
        report = tmp_path / "report.html"
        reported = subprocess.run(
            [sys.executable, "-m", "personagraph.cli", "report", str(run_dir), "-o", str(report)],
            capture_output=True, timeout=120, env=env,
        )
        outputs += [reported.stdout, reported.stderr]
        outputs += list(failing.communicate(timeout=300))
        assert failing.returncode != 0  # the endpoint is down: a failure, not a success
    finally:
        if failing.poll() is None:  # a failed assertion above: the process is not left running
            failing.kill()
            failing.wait()
    files = _files(run_dir) + _files(tmp_path / "down") + ([report] if report.exists() else [])
    assert any(p.name == "run.sqlite" for p in files)
    for secret in (KEY, FLAG_KEY):
        needle = secret.encode()
        for path in files:
            assert needle not in path.read_bytes(), f"{secret} found in {path}"
        for blob in outputs:
            assert needle not in blob
