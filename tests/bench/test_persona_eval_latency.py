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


def test_the_real_graph_runs_its_fan_out_in_four_round_trips() -> None:
    # The structure, not the clock: with enough concurrency the fan-out of each step is in flight at
    # once, so the longest chain of requests is the graph's four dependent round trips. Whether the wall
    # time meets the 1.3 × ideal target is the bench's figure (bench/persona_eval_latency.py): on a
    # loaded CI machine it is not a property of the code, and a timed test there fails at random.
    with fake_server(delay=0.5, full_lists=True) as server:
        result = asyncio.run(measure(server, 0.5, concurrency=64))
    assert result.calls > 8 * GRAPH_ROUND_TRIPS  # the fan-out happened
    assert result.chain == GRAPH_ROUND_TRIPS, report(result)
    assert result.requests == result.calls  # nothing was resent
    assert report(result)[-1].startswith(f"wall {result.wall:.2f} ideal {result.ideal:.2f}")
