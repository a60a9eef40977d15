"""CPU of the run store's writer thread per LLM call at low concurrency, with and without batched commits.

At C = 8 against a 2 s server an eval finishes about 4 calls a second, each with two rows (the call and
its record). This replays that pattern (two rows every ``--gap`` seconds) into a write-behind
:class:`~personagraph.store.RunStore`, once with commits batched over ``COMMIT_INTERVAL_S`` and once with
every row committed on arrival (interval 0, the old behaviour), ``--rounds`` times each, and prints the
writer thread's CPU (user + system) and the caller's thread CPU per call. No model, no server, no event
loop: only the store, so the figure is steady even on a shared machine.

    .venv/bin/python bench/store_write_behind.py [--calls 300] [--gap 0.03] [--rounds 2]
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._harness import load_average, machine  # noqa: E402
from personagraph import store as store_module  # noqa: E402
from personagraph.store import CallRow, RunStore  # noqa: E402

REQUEST = {"messages": [{"role": "user", "content": "a question of a few hundred words " * 90}]}


class MeasuredStore(RunStore):
    """A RunStore whose writer thread reports its CPU time when it ends."""

    writer_cpu_s = 0.0

    def _write_loop(self) -> None:
        try:
            super()._write_loop()
        finally:
            usage = resource.getrusage(resource.RUSAGE_THREAD)
            MeasuredStore.writer_cpu_s = usage.ru_utime + usage.ru_stime


def one(calls: int, gap: float) -> tuple[float, float]:
    """(writer ms, caller ms) of CPU per call for ``calls`` calls, two rows each, ``gap`` seconds apart."""
    with tempfile.TemporaryDirectory() as run_dir:
        store = MeasuredStore(run_dir, write_behind=True)
        started = time.thread_time()
        for i in range(calls):
            store.put_call(CallRow(f"key{i}", "persona", "openai:m", "an answer " * 60, 200, 80, 2.0), REQUEST)
            store.put("answer", f"a{i}", {"text": "an answer " * 80}, unit="persona")
            time.sleep(gap)
        caller = time.thread_time() - started
        store.close()
    return 1000 * MeasuredStore.writer_cpu_s / calls, 1000 * caller / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--gap", type=float, default=0.03, help="seconds between calls")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    print(machine())
    batched = store_module.COMMIT_INTERVAL_S
    for _ in range(args.rounds):
        for interval in (0.0, batched):
            store_module.COMMIT_INTERVAL_S = interval
            writer, caller = one(args.calls, args.gap)
            print(f"commit interval {interval:g} s: writer {writer:.3f} ms CPU per call, caller {caller:.3f} ms "
                  f"(load average {load_average()})")
    store_module.COMMIT_INTERVAL_S = batched


if __name__ == "__main__":
    main()
