"""What LangSmith tracing costs when off: framework CPU per call with the tracing hook against without it.

Every model call asks :func:`personagraph.models.tracing.enabled` once (``ModelClient._call``) before it
takes the untraced path. This bench runs the throughput bench's full pipeline (``bench/throughput.py``: fake
OpenAI server in its own process, this process's CPU divided by its calls) with the hook as shipped
("hooked") and with ``ModelClient._call`` going straight to the untraced path ("bare"), in rounds of one
run each, alternating which goes first, so that a drift of the shared machine's load falls on both.
Target: hooked CPU per call within 5% of bare. A run's CPU per call moves by ~10% between
back-to-back runs on a shared VM, so the verdict needs the 95% interval of the paired change inside ±5%,
not just its mean. It also times the check alone, which is the whole difference between the two.

    .venv/bin/python bench/tracing_overhead.py [--personas 10] [--concurrency 32] [--rounds 6] [--delay 2.0]

Tracing must be off in the environment (no ``LANGSMITH_TRACING=true``): that is the case measured.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._harness import ServerProcess, fake_server, load_average, machine, personas  # noqa: E402
from bench.throughput import JUDGE, one_run  # noqa: E402
from personagraph.cli.eval import _fast_event_loop  # noqa: E402
from personagraph.judges.protocols import default_protocol  # noqa: E402
from personagraph.models import tracing  # noqa: E402
from personagraph.models.client import ModelClient  # noqa: E402

HOOKED = ModelClient._call
TARGET = 0.05
PROTOCOL = default_protocol(JUDGE)  # the throughput bench's judges, asked as an `openai:` judge is by default


async def _bare_call(self: ModelClient, messages: Any, response_format: Any, top_logprobs: Any = None, *,
                     structured: bool = False, fresh: bool = False) -> Any:
    """``ModelClient._call`` without the tracing check: the untraced path only."""
    params = self._params(response_format, top_logprobs)
    return await self._cached_call(messages, params, response_format, structured, fresh)


def check_cost_us(n: int = 200_000) -> float:
    """Microseconds one ``tracing.enabled()`` check takes (the hook's whole cost with tracing off)."""
    started = time.process_time()
    for _ in range(n):
        tracing.enabled()
    return 1e6 * (time.process_time() - started) / n


async def bench(server: ServerProcess, n_personas: int, concurrency: int, rounds: int) -> None:
    await one_run(server, personas(2, offset=5000), 8, PROTOCOL)  # warm-up: imports, connections, caches
    gc.freeze()  # as `personagraph eval` does once its imports are done
    people = personas(n_personas)
    cpu_ms: dict[str, list[float]] = {"bare": [], "hooked": []}
    print(f"tracing off: {n_personas} personas at C = {concurrency}, {rounds} rounds of one bare and one "
          "hooked run, alternating which goes first")
    print(f"{'round':>5} {'variant':>7} {'calls':>6} {'wall s':>7} {'cpu ms/call':>11}  "
          "load avg at start → end")
    for round_no in range(1, rounds + 1):
        order = (("bare", _bare_call), ("hooked", HOOKED))
        for variant, call in order if round_no % 2 else order[::-1]:  # odd rounds: bare first
            ModelClient._call = call  # type: ignore[method-assign]
            load = load_average()
            r = await one_run(server, people, concurrency, PROTOCOL)
            cpu_ms[variant].append(1000 * r["cpu"] / r["calls"])
            print(f"{round_no:>5} {variant:>7} {r['calls']:>6} {r['wall']:>7.2f} "
                  f"{cpu_ms[variant][-1]:>11.3f}  {load} → {load_average()}")
    ModelClient._call = HOOKED  # type: ignore[method-assign]
    bare, hooked = statistics.mean(cpu_ms["bare"]), statistics.mean(cpu_ms["hooked"])
    low, change, high = paired_change(cpu_ms["bare"], cpu_ms["hooked"])
    check_us = check_cost_us()
    print(f"check alone: {check_us:.2f} µs per call = {check_us / 10 / bare:.3f}% of the bare CPU per call")
    verdict = "met" if -TARGET <= low and high <= TARGET else "not shown" if low <= TARGET else "NOT met"
    print(f"cpu_ms_per_call bare {bare:.3f} hooked {hooked:.3f} change {change:+.1%} 95% CI [{low:+.1%}, "
          f"{high:+.1%}] over {rounds} paired rounds (target within ±{TARGET:.0%}: {verdict}; load average "
          f"{load_average()})")


def paired_change(bare: list[float], hooked: list[float]) -> tuple[float, float, float]:
    """Mean relative change hooked/bare − 1 over the rounds, with a 95% t interval (rounds are paired:
    each round's two runs ran back to back, so they share the machine's load)."""
    ratios = [h / b - 1 for b, h in zip(bare, hooked, strict=True)]
    mean = statistics.mean(ratios)
    if len(ratios) < 2:
        return mean, mean, mean
    half = stats.t.ppf(0.975, len(ratios) - 1) * statistics.stdev(ratios) / len(ratios) ** 0.5
    return mean - half, mean, mean + half


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--personas", type=int, default=10)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--delay", type=float, default=2.0, help="seconds the server waits before each reply")
    args = parser.parse_args()
    if tracing.enabled():
        parser.error("tracing is on in this environment; unset LANGSMITH_TRACING to measure the off path")
    print(machine())
    _fast_event_loop()  # as `personagraph eval` does
    with fake_server(delay=args.delay) as server:
        asyncio.run(bench(server, args.personas, args.concurrency, args.rounds))


if __name__ == "__main__":
    main()
