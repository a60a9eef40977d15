"""bench/persona_eval_latency.py fails a sequential run and passes the real graph (fake server, small)."""

from __future__ import annotations

import asyncio

from bench._harness import fake_server
from bench.persona_eval_latency import GRAPH_ROUND_TRIPS, measure, report


def test_a_sequential_executor_fails_the_latency_target() -> None:
    # Concurrency 1: the model layer's limiter lets one request out at a time, so the graph's fan-out
    # runs one call after another. The observed chain then grows with the wall time; the ideal does not.
    with fake_server(delay=0.1, full_lists=True) as server:
        result = asyncio.run(measure(server, 0.1, concurrency=1))
    assert result.chain > 3 * GRAPH_ROUND_TRIPS
    assert not result.passed
    assert result.ratio > 3
    assert report(result)[-1].endswith("NOT met")


def test_the_real_graph_meets_the_latency_target() -> None:
    with fake_server(delay=1.0, full_lists=True) as server:
        result = asyncio.run(measure(server, 1.0, concurrency=64))
    assert result.calls > 8 * GRAPH_ROUND_TRIPS  # the fan-out happened, in about four round trips
    assert result.passed, report(result)
    assert report(result)[-1].endswith(": met")
