"""bench/embedded.py: the sampler sees the memory a child process holds, RSS every sample, PSS beside it."""

from __future__ import annotations

import sys
from pathlib import Path

from bench.embedded import measure


def test_the_peak_of_a_child_holding_memory_is_seen() -> None:
    holds = ("import time; block = bytearray(200 * 2**20); block[::4096] = b'x' * len(block[::4096]); "
             "time.sleep(1.5)")
    measured = measure([sys.executable, "-c", holds])
    assert measured.exit_code == 0
    assert 200 <= measured.peak_rss_mb < 400  # the 200 MB block and an interpreter
    assert 0 < measured.peak_pss_mb <= measured.peak_rss_mb + 1
    assert measured.wall_s >= 1.5


def test_the_cpu_time_of_each_process_in_the_tree_is_counted_by_its_kind() -> None:
    """A child that computes for a while is charged its CPU seconds, under its command name."""
    busy = ("import time; end = time.process_time() + 0.6\n"
            "while time.process_time() < end: pass\ntime.sleep(0.3)")
    measured = measure([sys.executable, "-c", busy])
    assert measured.exit_code == 0
    name = Path(sys.executable).name[:15]  # the kernel's name of a process: its program's, 15 characters
    assert 0.5 <= measured.cpu_s.get(name, 0.0) < 5, measured.cpu_s
    assert f"{name} " in measured.cpu_text()


def test_a_process_that_execs_another_program_is_counted_under_the_program_it_became() -> None:
    """The engine's launcher is Python until it execs llama-server under the same pid: the CPU goes to the
    program the process became, not to the name it had when first sampled."""
    loop = "i=0; while [ $i -lt 1000000 ]; do i=$((i+1)); done"  # ~0.5 s of CPU on a fast core
    becomes_sh = f"import os, time; time.sleep(0.4); os.execv('/bin/sh', ['sh', '-c', {loop!r}])"
    measured = measure([sys.executable, "-c", becomes_sh])
    assert measured.exit_code == 0
    assert list(measured.cpu_s) == ["sh"] and measured.cpu_s["sh"] > 0.1, measured.cpu_s
