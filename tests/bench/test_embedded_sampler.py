"""bench/embedded.py: the sampler sees the memory a child process holds, RSS every sample, PSS beside it."""

from __future__ import annotations

import sys

from bench.embedded import measure


def test_the_peak_of_a_child_holding_memory_is_seen() -> None:
    holds = ("import time; block = bytearray(200 * 2**20); block[::4096] = b'x' * len(block[::4096]); "
             "time.sleep(1.5)")
    measured = measure([sys.executable, "-c", holds])
    assert measured.exit_code == 0
    assert 200 <= measured.peak_rss_mb < 400  # the 200 MB block and an interpreter
    assert 0 < measured.peak_pss_mb <= measured.peak_rss_mb + 1
    assert measured.wall_s >= 1.5
