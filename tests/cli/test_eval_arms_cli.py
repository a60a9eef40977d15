"""``eval --controls`` and ``eval --samples K`` on the command line: the terminal shows the control arms
with the judges' standing and the repeated samples' pass^K; the same command again makes 0 calls."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from personagraph.cli import app


def test_controls_and_samples_on_the_command_line(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    args = ["eval", "--persona", "A 70-year-old retired cowboy from Texas", "-m", "test:seeded",
            "-j", "test:j1", "--generator", "test:gen", "--quick", "--controls", "--samples", "3",
            "--run-dir", str(run_dir)]
    runner = CliRunner()
    first = runner.invoke(app, args, env={"COLUMNS": "200"})
    assert first.exit_code == 0, first.output
    out = first.output
    assert "Control arms: the judges' standing" in out and "control:contrast:test:seeded" in out
    assert "control:refusal" in out and "clearly below =" in out
    assert "Repeated samples: 3 answers per question" in out and "pass^3" in out
    summary = json.loads((run_dir / "summary.json").read_text())
    assert {row["kind"] for row in summary["controls"]["standing"]} == {"generic", "contrast", "refusal"}
    assert summary["models"]["test:seeded"]["samples"]["k"] == 3
    again = runner.invoke(app, args, env={"COLUMNS": "200"})
    assert again.exit_code == 0 and "LLM calls this run: 0 " in again.output
