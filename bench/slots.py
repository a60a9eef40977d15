"""Parallel slots of the embedded judge's server: a finished quick run's calls to the 1.5B, replayed as the
run sends them, on a fresh llama-server per slot count.

Why: ``engine.SLOTS`` decides how many of the graph's concurrent calls one server decodes in one batch. The
quick run sends its 1.5B calls in waves, one call per task: the environment choice, then five question
calls at once, then five verdicts (at once here; in the run they start as the answers finish). Each wave is
sent at once and timed until its last reply; with fewer slots than calls the server queues the rest, so
``--slots 1`` is one call at a time. The calls are read from the run's store (``calls.request``: messages,
sampling parameters, JSON schema and logprobs), and the slot counts alternate (ABBA…) to spread the host's
drift over all of them.

    .venv/bin/personagraph eval --persona "A 70-year-old retired cowboy from Texas" --quick --run-dir D
    .venv/bin/python bench/slots.py D [--slots 4,5] [--repeats 2]

One line per slot count and repeat (each wave's seconds and generated tokens), then
``slots_<n>_s <s> …`` (every wave's seconds, summed over the repeats).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from itertools import groupby
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._harness import fresh_server, load_average, machine, stored_bodies  # noqa: E402

TARGET = "qwen2.5-coder-1.5b"
Wave = tuple[str, list[dict[str, Any]]]


def waves(bodies: list[tuple[str, dict[str, Any]]]) -> list[Wave]:
    """Consecutive calls of one role form a wave, sent at once (the graph's fan-out of one step)."""
    return [(role, [body for _, body in group]) for role, group in groupby(bodies, key=lambda rb: rb[0])]


async def serve(slots: int, run: list[Wave]) -> list[tuple[str, float, list[int]]]:
    """Starts the 1.5B's engine with ``slots`` slots, sends each wave at once and waits for its last reply,
    stops it. Returns each wave's role, seconds and generated tokens per call."""
    timed = []
    async with fresh_server(TARGET, slots=slots) as send:
        for role, bodies in run:
            started = time.monotonic()
            replies = await asyncio.gather(*(send(body) for body in bodies))
            timed.append((role, time.monotonic() - started,
                          [int(reply["usage"]["completion_tokens"]) for reply in replies]))
    return timed


def main(run_dir: Path, slot_counts: list[int], repeats: int) -> None:
    print(machine(), flush=True)
    run = waves(stored_bodies(run_dir, f"local:{TARGET}"))
    print("waves: " + ", ".join(f"{role} ×{len(bodies)}" for role, bodies in run), flush=True)
    totals = dict.fromkeys(slot_counts, 0.0)
    for repeat in range(repeats):
        for slots in slot_counts if repeat % 2 == 0 else slot_counts[::-1]:
            timed = asyncio.run(serve(slots, run))
            totals[slots] += sum(seconds for _, seconds, _ in timed)
            print(f"repeat {repeat} slots {slots}: "
                  + "; ".join(f"{role} {seconds:.1f} s {tokens}" for role, seconds, tokens in timed)
                  + f" (load {load_average()})", flush=True)
    print(" ".join(f"slots_{slots}_s {seconds:.1f}" for slots, seconds in totals.items()))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path, help="a finished quick run's directory (its run.sqlite)")
    parser.add_argument("--slots", default="4,5", help="slot counts to compare, comma-separated")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    try:
        counts = [int(n) for n in args.slots.split(",")]
    except ValueError:
        sys.exit(f"--slots {args.slots}: not a comma-separated list of whole numbers")
    if not counts or min(counts) < 1:
        sys.exit(f"--slots {args.slots}: every slot count must be at least 1")
    main(args.run_dir, counts, args.repeats)
