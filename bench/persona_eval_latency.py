"""Latency of one persona through the PersonaGym graph against a server that answers after a fixed delay.

The graph has a fixed number of dependent LLM round trips: select → questions → (answers ‖ exemplars)
→ verdicts, four. With enough concurrency one persona should take about four delays, however many
calls each step fans out to; a sequential loop takes one delay per call (~36). The ideal is that fixed
count × delay, not the chain of requests observed: a sequential run lengthens the observed chain with
its wall time and would always look ideal. Target: wall (the whole ``run``: store, graph, summary)
≤ 1.3 × ideal. Retries and other extra round trips count against the target, not into the ideal.

    .venv/bin/python bench/persona_eval_latency.py [--delay 1.0] [--concurrency 64]

The fake server (bench/fake_openai.py) runs in its own process and fills every list to the length asked
for (``full_lists``), as a model that delivers what was asked: with random lengths, a short question
list prompts a top-up call, one more round trip that is the model's, not the framework's. The process is
warmed up on another persona first (imports, connections), as a batch would be after its first persona.
The last line is ``wall <s> ideal <s> ratio <x> sequential <s> target <= 1.3: met|NOT met``.

``--jitter J`` spreads each reply's delay over ``delay × (1 ± J)``, drawn per request (the same request
waits alike in every run, so two versions of the graph meet the same delays), as an API's latency varies:
a stage barrier then holds every branch back to the slowest call of the stage. The ideal is then the
longest each round trip can take, ``delay × (1 + J)`` each.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._harness import (  # noqa: E402
    ServerProcess,
    fake_server,
    load_average,
    machine,
    personas,
    trace_calls,
)
from personagraph.models import ModelSettings  # noqa: E402
from personagraph.runs.eval import EvalConfig  # noqa: E402
from personagraph.runs.eval import run as run_eval  # noqa: E402

GRAPH_ROUND_TRIPS = 4  # select → questions → answers ‖ exemplars → verdicts
TARGET_RATIO = 1.3


@dataclass(frozen=True)
class Latency:
    """One persona's run against a server that answers after ``delay`` seconds."""

    delay: float
    concurrency: int
    jitter: float
    wall: float  # the whole run: store, graph, summary
    requests: int  # sent to the server, retries included
    calls: int  # finished model calls
    chain: int  # longest chain of requests observed one after another (informative only)
    window: float  # first request sent → last reply received
    roles: dict[str, int]

    @property
    def ideal(self) -> float:
        """The graph's dependent round trips × the longest delay: the least wall time any executor can be
        sure to reach."""
        return GRAPH_ROUND_TRIPS * self.delay * (1 + self.jitter)

    @property
    def ratio(self) -> float:
        return self.wall / self.ideal

    @property
    def passed(self) -> bool:
        return self.ratio <= TARGET_RATIO


def config(people: list, concurrency: int) -> EvalConfig:
    """The graph at its widest: the judge asked the PersonaGym way (``rationale``), which reads exemplars,
    so they are written beside the answers (an ``openai:`` judge's default, ``evidence``, reads none)."""
    return EvalConfig(personas=people, models=["openai:persona-model"], judges=["openai:judge-model"],
                      generator="openai:generator-model", concurrency=concurrency, judge_protocol="rationale")


async def measure(server: ServerProcess, delay: float, concurrency: int, jitter: float = 0.0) -> Latency:
    """Warms up on one persona, then times another one through ``run`` at ``concurrency``."""
    settings = ModelSettings(base_url=server.base_url, api_key="sk-bench-not-a-key")
    with tempfile.TemporaryDirectory() as warm:
        await run_eval(config(personas(1, offset=1000), concurrency), warm, settings=settings)
    gc.freeze()
    with tempfile.TemporaryDirectory() as run_dir, trace_calls() as trace:
        started = time.perf_counter()
        summary = await run_eval(config(personas(1), concurrency), run_dir, settings=settings)
        wall = time.perf_counter() - started
    return Latency(delay=delay, concurrency=concurrency, jitter=jitter, wall=wall, requests=len(trace.spans),
                   calls=summary.llm_calls, chain=trace.chain(), window=trace.window(),
                   roles={role: v["calls"] for role, v in summary.roles.items()})


def report(result: Latency) -> list[str]:
    """The bench's lines; the last one compares wall time with the ideal."""
    d = result.delay
    return [
        f"persona_eval latency: 1 persona, delay {d:g}s (± {result.jitter:.0%}), concurrency "
        f"{result.concurrency}",
        f"  LLM requests: {result.requests} ({result.calls} finished calls, {result.requests - result.calls} "
        f"resent); by role: {result.roles}",
        f"  ideal: {GRAPH_ROUND_TRIPS} dependent round trips (select → questions → answers ‖ exemplars → "
        f"verdicts) × {d * (1 + result.jitter):g}s = {result.ideal:.2f}s",
        f"  observed: first request → last reply {result.window:.2f}s; longest chain of requests "
        f"{result.chain} (extra round trips beyond {GRAPH_ROUND_TRIPS} count against the target)",
        f"  sequential loop: {result.requests} requests × {d:g}s = {result.requests * d:.2f}s",
        f"wall {result.wall:.2f} ideal {result.ideal:.2f} ratio {result.ratio:.2f} sequential "
        f"{result.requests * d:.2f} target <= {TARGET_RATIO:g}: {'met' if result.passed else 'NOT met'}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delay", type=float, default=1.0, help="seconds the server waits before each reply")
    parser.add_argument("--concurrency", type=int, default=64,
                        help="requests in flight (enough for one persona)")
    parser.add_argument("--jitter", type=float, default=0.0,
                        help="spread of each reply's delay, delay × (1 ± jitter), drawn per request")
    parser.add_argument("--seed", type=int, default=0, help="seed of the fake server's draws (the delays)")
    args = parser.parse_args()
    print(machine())
    with fake_server(delay=args.delay, jitter=args.jitter, seed=args.seed, full_lists=True) as server:
        result = asyncio.run(measure(server, args.delay, args.concurrency, args.jitter))
    print(f"(load average at the end: {load_average()})")
    print("\n".join(report(result)))


if __name__ == "__main__":
    main()
