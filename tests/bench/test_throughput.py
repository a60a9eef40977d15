"""bench/throughput.py applies the CPU target to every concurrency level, not to a pooled average."""

from __future__ import annotations

from bench.throughput import CPU_TARGET_MS, cpu_check


def test_one_slow_level_fails_the_cpu_target_that_a_pooled_average_would_pass() -> None:
    results = {1: {"personas": 3, "cpu_ms": 9.0, "calls": 100},
               8: {"personas": 50, "cpu_ms": 3.0, "calls": 1800},
               32: {"personas": 50, "cpu_ms": 1.0, "calls": 1800},
               128: {"personas": 50, "cpu_ms": 1.0, "calls": 1800}}
    checked, worst = cpu_check(results, 50)
    pooled = sum(results[c]["cpu_ms"] * results[c]["calls"] for c in checked) / sum(
        results[c]["calls"] for c in checked)
    assert checked == [8, 32, 128]  # C = 1 runs on a subset: its fixed costs are not per call
    assert pooled <= CPU_TARGET_MS < worst == 3.0
