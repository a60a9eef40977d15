"""CPU and wake-ups per LLM call of the run store at low concurrency: batched commits against one per row.

At C = 8 against a 2 s server an eval finishes about 4 calls a second, each with two rows (the call and
its record), written from the event loop. This replays that pattern (two rows every ``--gap`` seconds,
the loop asleep in between) into a :class:`~personagraph.store.RunStore` on an event loop, once with
write-behind (rows held and committed together, at the latest ``COMMIT_INTERVAL_S`` after the batch's
first row) and once with every row committed on arrival, ``--rounds`` times each, and prints this
process's CPU (every thread) and context switches per call, ``voluntary+involuntary``. No model, no
server: only the store, so the pair is comparable on a shared machine; the load average is printed.

    .venv/bin/python bench/store_write_behind.py [--calls 300] [--gap 0.05] [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._harness import load_average, machine, own_switches  # noqa: E402
from personagraph.cli.eval import _fast_event_loop  # noqa: E402
from personagraph.store import CallRow, RunStore  # noqa: E402

REQUEST = {"messages": [{"role": "user", "content": "a question of a few hundred words " * 90}]}


async def one(calls: int, gap: float, write_behind: bool) -> tuple[float, float, float]:
    """(CPU ms, voluntary and involuntary switches) per call for ``calls`` calls of two rows, ``gap`` apart."""
    with tempfile.TemporaryDirectory() as run_dir:
        store = RunStore(run_dir, write_behind=write_behind)
        cpu, switches = time.process_time(), own_switches()
        for i in range(calls):
            store.put_call(CallRow(f"key{i}", "persona", "openai:m", "an answer " * 60, 200, 80, 2.0), REQUEST)
            store.put("answer", f"a{i}", {"text": "an answer " * 80}, unit="persona")
            await asyncio.sleep(gap)
        store.close()
        cpu, switches = time.process_time() - cpu, own_switches() - switches
    return 1000 * cpu / calls, switches.voluntary / calls, switches.involuntary / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--gap", type=float, default=0.05, help="seconds between calls")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    print(machine())
    _fast_event_loop()  # as `personagraph eval` does
    for _ in range(args.rounds):
        for write_behind in (False, True):
            cpu, voluntary, involuntary = asyncio.run(one(args.calls, args.gap, write_behind))
            label = "write-behind  " if write_behind else "commit per row"
            print(f"{label}: {cpu:.3f} ms CPU per call, switches per call {voluntary:.2f}+{involuntary:.2f} "
                  f"(load average {load_average()})")


if __name__ == "__main__":
    main()
