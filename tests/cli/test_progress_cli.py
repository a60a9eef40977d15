"""Progress people can follow anywhere: plain lines at a steady interval where the output is not a
terminal (a CI log, ``| cat``), an ETA on the terminal's bars, and a finished run that says what it reused."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from personagraph.cli import _common
from personagraph.runs.base import ProgressEvent

COWBOY = "A 70-year-old retired cowboy from Texas"


def test_a_run_piped_through_cat_prints_progress_lines_while_it_runs(tmp_path) -> None:
    """The quick run with slow test models, its stdout a pipe: progress lines come while it runs (some
    with stages still under way), before the result table."""
    env = {**os.environ, "PERSONAGRAPH_PROGRESS_INTERVAL": "0.2", "COLUMNS": "100"}
    command = [sys.executable, "-m", "personagraph.cli", "eval", "--quick", "--persona", COWBOY,
               "--persona", "A nurse", "--model", "test:slow-agent", "--judge", "test:slow-judge",
               "--generator", "test:slow-gen", "--concurrency", "1", "--run-dir", str(tmp_path / "run")]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    arrived: list[tuple[float, str]] = []
    assert process.stdout is not None
    for line in process.stdout:
        arrived.append((time.monotonic(), line.rstrip("\n")))
    assert process.wait(timeout=120) == 0, "\n".join(line for _, line in arrived)
    lines = [line for _, line in arrived]
    progress = [i for i, line in enumerate(lines) if line.startswith("progress ")]
    table = next(i for i, line in enumerate(lines) if "PersonaScore" in line)
    assert len(progress) >= 2 and progress[-1] < table, lines
    assert [i for i in progress if "ETA" in lines[i]], lines  # a stage under way, with its ETA
    assert "answers " in lines[progress[-1]] and "verdicts " in lines[progress[-1]]
    assert arrived[progress[0]][0] < arrived[table][0] - 0.1  # printed during the run, not with the table


def test_the_plain_line_names_each_stage_with_its_count_and_eta() -> None:
    progress = _common.progress_display()
    draw = _common.progress_bars(progress)
    draw(ProgressEvent("select", 1, 1))
    draw(ProgressEvent("answers", 0, 10))
    for done in range(1, 4):
        time.sleep(0.01)
        draw(ProgressEvent("answers", done, 10))
    line = progress.plain_line()
    assert line.startswith("progress 0:00 · select 1/1 done · answers 3/10 ETA 0:0"), line
    draw(ProgressEvent("verdicts", 5, 5, reused=5))
    assert progress.plain_line().endswith("verdicts (5 reused) 5/5 done")


def test_a_finished_run_run_again_says_it_was_complete(tmp_path) -> None:
    from typer.testing import CliRunner

    from personagraph.cli import app

    args = ["eval", "--quick", "--persona", COWBOY, "--model", "test:agent", "--judge", "test:judge",
            "--generator", "test:gen", "--run-dir", str(tmp_path / "run")]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0 and "was complete" not in first.output, first.output
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0, again.output
    assert "was complete: every item was reused" in again.output and "verdicts (5 reused)" in again.output


def test_progress_and_notices_go_to_stderr_and_stdout_holds_the_results(tmp_path) -> None:
    """`personagraph eval … > results.txt` captures the results only: the progress lines (and, run again,
    the note that the run was complete) are on stderr."""
    env = {**os.environ, "PERSONAGRAPH_PROGRESS_INTERVAL": "0.2", "COLUMNS": "100"}
    command = [sys.executable, "-m", "personagraph.cli", "eval", "--quick", "--persona", COWBOY,
               "--model", "test:slow-agent", "--judge", "test:slow-judge", "--generator", "test:slow-gen",
               "--concurrency", "1", "--run-dir", str(tmp_path / "run")]
    for _ in range(2):
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
        assert done.returncode == 0, done.stderr
        assert "PersonaScore" in done.stdout and "PersonaScore" not in done.stderr
        assert not [line for line in done.stdout.splitlines() if line.startswith("progress ") or "ETA" in line]
        assert "verdicts" in done.stderr
    assert [line for line in done.stderr.splitlines() if line.startswith("progress ")] or "━" in done.stderr
    assert "was complete" in done.stderr and "was complete" not in done.stdout
