"""bench/throughput.py applies the CPU target to every concurrency level, not to a pooled average."""

from __future__ import annotations

import time

from bench._harness import Switches, own_switches, wake_cost_us
from bench.throughput import CPU_TARGET_MS, cpu_check, cpu_target_line, per_call


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


def test_the_last_line_says_met_or_not_at_each_level() -> None:
    results = {8: {"personas": 50, "cpu_ms": 2.31}, 32: {"personas": 50, "cpu_ms": 1.94},
               128: {"personas": 50, "cpu_ms": 2.0}, 1: {"personas": 3, "cpu_ms": 9.0}}
    line = cpu_target_line(results, 50)
    assert line == ("cpu_target @8 2.31 (≤2) NOT met, @32 1.94 (≤2) met, @128 2.00 (≤1) NOT met: NOT met")
    results[8]["cpu_ms"], results[128]["cpu_ms"] = 1.5, 0.9
    met = "@8 1.50 (≤2) met, @32 1.94 (≤2) met, @128 0.90 (≤1) met: met"
    assert cpu_target_line(results, 50).endswith(met)


def test_context_switches_are_counted_and_printed_per_call() -> None:
    before = own_switches()
    time.sleep(0.01)  # sleeping is a voluntary switch
    assert (own_switches() - before).voluntary >= 1
    assert per_call(Switches(31, 6), 10) == "3.1+0.6"


def test_the_wake_probe_bills_cpu_not_the_time_asleep() -> None:
    billed = wake_cost_us(sleeps=3, asleep_s=0.05)
    assert 0 < billed < 0.5 * 0.05 * 1e6  # a sleeping thread is billed its wake-up, never its 50 ms asleep
