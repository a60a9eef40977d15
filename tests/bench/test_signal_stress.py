"""bench/signal_stress.py's trial with two processes started together on one new run directory, both
signalled: each ends in time (finished, signalled with the resume line, or refused by the run lock in one
line), and the resumed run equals an uninterrupted one: neither removed what the other made."""

from __future__ import annotations

import random
from pathlib import Path

from bench import signal_stress


def test_two_processes_started_together_on_one_run_dir_end_cleanly_and_resume(tmp_path: Path) -> None:
    args = signal_stress.commands("test", None, tmp_path / "unused.jsonl", "rationale")["eval"]
    wall, reference = signal_stress.reference_run("eval", args, tmp_path, signal_stress.ENV)
    result = signal_stress.trial("eval", args, wall, reference, tmp_path, random.Random(5), 20.0,
                                 signal_stress.ENV, 0, "together")
    assert result.together is not None
    assert result.ok and result.resume_equal, result
