"""Latency of one persona through the PersonaGym graph against a server that answers after a fixed delay.

The graph's critical path is select → questions → (answers ‖ exemplars) → judge: 4 LLM round trips,
plus any format-reminder retry on that path. With enough concurrency, one persona should take about
that many delays, not one delay per call as a sequential loop would. Target: wall ≤ 1.3 × critical path.

    .venv/bin/python bench/persona_eval_latency.py [--delay 1.0] [--concurrency 64]

The fake server (bench/fake_openai.py) runs in its own process; the process is warmed up on another
persona first (imports, connections), as a batch would be after its first persona.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._harness import fake_server, personas, trace_calls  # noqa: E402

GRAPH_ROUND_TRIPS = 4  # select → questions → answers ‖ exemplars → judge


async def run(base_url: str, delay: float, concurrency: int) -> None:
    from personagraph.runs.eval import EvalConfig
from personagraph.runs.eval import run as run_eval
    from personagraph.models import ModelSettings

    settings = ModelSettings(base_url=base_url, api_key="sk-bench-not-a-key")

    def config(persona: list) -> EvalConfig:
        return EvalConfig(personas=persona, models=["openai:persona-model"], judges=["openai:judge-model"],
                         generator="openai:generator-model", concurrency=concurrency)

    with tempfile.TemporaryDirectory() as warm:
        await run_eval(config(personas(1, offset=1000)), warm, settings=settings)
    gc.freeze()
    with tempfile.TemporaryDirectory() as run_dir, trace_calls() as trace:
        started = time.perf_counter()
        summary = await run_eval(config(personas(1)), run_dir, settings=settings)
        wall = time.perf_counter() - started
    calls = len(trace.spans)
    retries = calls - summary.llm_calls  # requests beyond one per finished call (transport retries)
    chain = trace.chain()
    critical = chain * delay
    print(f"persona_eval latency: 1 persona, delay {delay:g}s, concurrency {concurrency}")
    print(f"  LLM requests: {calls} ({summary['llm_calls']} finished calls, {retries} resent); "
          f"by role: { {r: v['calls'] for r, v in summary['roles'].items()} }")
    print(f"  critical path: {chain} round trips observed (graph: {GRAPH_ROUND_TRIPS} + "
          f"{chain - GRAPH_ROUND_TRIPS} format/transport retries) × {delay:g}s = {critical:.2f}s")
    print(f"  wall: {wall:.2f}s for run_eval() (store, graph, summary); first request → last reply "
          f"{trace.window():.2f}s")
    print(f"  sequential loop estimate: {calls} calls × {delay:g}s = {calls * delay:.2f}s")
    print(f"wall {wall:.2f} critical_path {critical:.2f} ratio {wall / critical:.2f} "
          f"sequential {calls * delay:.2f} (target ratio <= 1.3)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delay", type=float, default=1.0, help="seconds the server waits before each reply")
    parser.add_argument("--concurrency", type=int, default=64, help="requests in flight (enough for one persona)")
    args = parser.parse_args()
    with fake_server(delay=args.delay) as server:
        asyncio.run(run(server.base_url, args.delay, args.concurrency))


if __name__ == "__main__":
    main()
