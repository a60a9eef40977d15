"""A run still being written is read as it is, and says so: views and reports name the writing process."""

from __future__ import annotations

import io
import os
import shutil
from pathlib import Path

from rich.console import Console

from personagraph.report.html import build_report
from personagraph.report.load import load_run
from personagraph.report.view import view
from personagraph.store import RunStore


def _shown(run_dir: Path) -> tuple[str | None, str, str]:
    run = load_run(run_dir)
    console = Console(file=io.StringIO(), width=200)
    console.print(view(run))
    return run.in_progress, console.file.getvalue(), build_report([run])


def test_a_run_in_progress_says_so_in_view_and_report_and_not_once_it_ended(eval_run: Path,
                                                                            tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(eval_run, run_dir)
    writer = RunStore(run_dir)  # holds the run's lock, as a running eval does
    try:
        line, text, html = _shown(run_dir)
    finally:
        writer.close()
    assert line is not None and f"is in progress (process {os.getpid()} on " in line
    assert "is in progress" in text and "is in progress" in html
    line, text, html = _shown(run_dir)
    assert line is None and "in progress" not in text and "is in progress" not in html
