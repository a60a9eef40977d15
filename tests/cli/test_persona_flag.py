"""A ``--persona`` with nothing visible in it is refused in one line by every command that takes one,
before any run directory or call exists (zero-width characters survive ``str.split``; a red-team finding)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from personagraph.cli import app

COMMANDS = {
    "eval": ["eval", "-m", "test:agent", "-j", "test:judge"],
    "simulate": ["simulate", "--model", "test:agent", "--user-model", "test:user", "--no-judge"],
    "ask": ["ask", "--model", "test:agent", "hi"],
}


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize(("persona", "message"), [
    ("\u200b\u2060", "--persona: empty persona (only invisible characters such as zero-width spaces)"),
    ("x" * 4001, "--persona"),
])
def test_a_persona_with_nothing_visible_or_too_long_is_one_line(tmp_path: Path, command: str, persona: str,
                                                                message: str) -> None:
    run_dir = tmp_path / "run"
    args = [*COMMANDS[command], "--persona", persona]
    args += [] if command == "ask" else ["--run-dir", str(run_dir)]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.output
    assert not run_dir.exists()


def test_a_persona_s_whitespace_is_collapsed_not_refused(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["ask", "--model", "test:agent", "--persona", "  A \t cowboy ", "hi"])
    assert result.exit_code == 0, result.output
