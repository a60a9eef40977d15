"""Calls per second against the ideal, and framework CPU per call, of the full pipeline at each concurrency.

For each concurrency C: calls/s against the ideal C/d, wall time against a sequential loop of the same
calls (calls × d), and the framework's CPU time per call — this process's CPU (every thread: event loop,
SQLite writer, checkpointer) divided by its calls; the fake server runs in a separate process, so none
of its CPU is counted (its own CPU per request is printed beside). Targets: ≥ 0.8 × C/d for C ≤ 128;
≥ 20× faster than sequential at C = 32; ≤ 2 ms CPU per call below C = 128 and ≤ 1 ms from it, at
*every* level run on all personas (C = 8, 32, 128 by default), not on an average over levels.

CPU time per call is not load-proof. At low concurrency every reply wakes the process on its own, and
on a shared VM each wake-up runs on cold caches: the fake server, which does the same fixed work per
request, shows it too (its ``srv ms/call`` rises at low C in step with ours), so read the two columns
together and quote the load average printed beside each level. ``switches/call`` counts what a clock
cannot be trusted for: context switches per call, ``voluntary+involuntary`` — a voluntary one is a
thread going to sleep and being woken again (every thread of this process, from getrusage; the
server's summed over its threads from /proc). On the 2-core Firecracker VM this project runs on (nested
PVM: kernel entries are dear), a Python thread's sleep → wake costs ~20 µs of CPU back to back and
~90-260 µs after 30-250 ms asleep, at load 2.5: at C = 8 wake-ups are the price, so fewer per call is
the lever (the store commits its batches on the event loop and the checkpointer runs inline: no thread of
ours wakes but the loop's). ``wake µs``, measured just before each level, is the host's price of one
sparse wake-up: the CPU billed to a thread that sleeps 0.25 s and wakes (median of 12). On this VM it was
100-160 µs on a quiet host; the load average inside the VM does not show the host's noise, this does, and
every CPU column of that row moves with it.

    .venv/bin/python bench/throughput.py [--personas 50] [--delay 2.0] [--concurrency 1,8,32,128]

At C = 1 the run is a sequential loop by construction (50 personas × ~36 calls × d); it is measured on
``--sequential-personas`` personas (default 3), enough for its calls/s; its CPU per call carries a run's
fixed costs (store, graph, summary CIs) over ~100 calls, so the CPU target is not applied there.
The figures line is ``ratio_to_ideal@128 <x> speedup_vs_sequential@32 <y> cpu_ms_per_call@8 <a> @32 <b>
@128 <c> worst <z>``; the last line gives the CPU target's verdict at each level,
``cpu_target ≤2ms @8 <a> met|NOT met, @32 …: met|NOT met``.

``--judge-protocol`` (default: the protocol ``openai:`` judges are asked with when none is named, as a
user meets it). ``evidence`` computes text features in this process and asks the embedded engine for
likelihoods (``judges/features.py``): the embedded judge's own compute, measured by
``bench/judge_protocols.py``, not here.

CPU time is this process's user + system time, so the lead's llama-server runs on the same cores move it
less than wall time; they still move it (shared caches, frequency, preemption), hence the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._harness import (  # noqa: E402
    ServerProcess,
    Switches,
    fake_server,
    load_average,
    machine,
    own_switches,
    personas,
    wake_cost_us,
)
from personagraph.cli.eval import _fast_event_loop  # noqa: E402
from personagraph.embeddings import clear_cache  # noqa: E402
from personagraph.judges.protocols import default_protocol  # noqa: E402
from personagraph.models import ModelSettings  # noqa: E402
from personagraph.runs.base import settle_collector  # noqa: E402
from personagraph.runs.eval import EvalConfig  # noqa: E402
from personagraph.runs.eval import run as run_eval  # noqa: E402

JUDGE = "openai:judge-model"
CPU_TARGET_MS = 2.0
CPU_TARGET_AT_SCALE_MS = 1.0  # from C = 128 on: a wave of replies shares the fixed costs


def cpu_target_ms(level: int) -> float:
    return CPU_TARGET_AT_SCALE_MS if level >= 128 else CPU_TARGET_MS


async def one_run(server: ServerProcess, people: list, concurrency: int, protocol: str) -> dict:
    """One evaluation of ``people`` at ``concurrency``: calls, wall, this process's CPU, the server's CPU."""
    config = EvalConfig(personas=people, models=["openai:persona-model"], judges=[JUDGE],
                        generator="openai:generator-model", concurrency=concurrency, judge_protocol=protocol)
    settings = ModelSettings(base_url=server.base_url, api_key="sk-bench-not-a-key")
    server.reset()
    clear_cache()  # each level embeds its texts afresh (the judges' text features), as a new process would
    server_cpu, server_switches = server.cpu_s(), server.switches()
    with tempfile.TemporaryDirectory() as run_dir:
        cpu, switches, started = time.process_time(), own_switches(), time.perf_counter()
        summary = await run_eval(config, run_dir, settings=settings)
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        switches = own_switches() - switches
    server_switches = server.switches() - server_switches
    stats = server.stats()
    return {"calls": summary.llm_calls, "requests": stats["requests_total"], "wall": wall, "cpu": cpu,
            "switches": switches, "server_switches": server_switches,
            "max_in_flight": stats["max_in_flight"], "server_cpu": server.cpu_s() - server_cpu,
            "finished": summary.personas_finished, "personas": len(people)}


def per_call(switches: Switches, calls: int) -> str:
    """Context switches per call as ``voluntary+involuntary`` (wake-ups + preemptions)."""
    calls = max(calls, 1)
    return f"{switches.voluntary / calls:.1f}+{switches.involuntary / calls:.1f}"


def cpu_check(results: dict[int, dict], n_personas: int) -> tuple[list[int], float]:
    """The levels the CPU target applies to (those run on all personas) and the worst CPU ms per call
    among them: the target holds at every level or not at all, a pooled average would hide a bad one."""
    checked = [level for level, r in results.items() if r["personas"] == n_personas]
    return checked, max(results[level]["cpu_ms"] for level in checked)


def cpu_target_line(results: dict[int, dict], n_personas: int) -> str:
    """The bench's last line: CPU ms per call and met / NOT met at each checked level, then overall."""
    checked, _ = cpu_check(results, n_personas)
    met = {level: results[level]["cpu_ms"] <= cpu_target_ms(level) for level in checked}
    levels = ", ".join(f"@{level} {results[level]['cpu_ms']:.2f} (≤{cpu_target_ms(level):g}) "
                       f"{'met' if met[level] else 'NOT met'}" for level in checked)
    return f"cpu_target {levels}: {'met' if all(met.values()) else 'NOT met'}"


async def bench(
    server: ServerProcess, n_personas: int, delay: float, levels: list[int], sequential: int, protocol: str,
) -> None:
    await one_run(server, personas(2, offset=5000), 8, protocol)  # warm-up: imports, connections, caches
    settle_collector()  # as every CLI command does when its event loop starts
    print(f"throughput: {n_personas} personas, full pipeline, delay d = {delay:g}s, server in its own "
          f"process, judge protocol {protocol}")
    print(f"{'C':>5} {'personas':>8} {'calls':>6} {'wall s':>8} {'calls/s':>8} {'ideal C/d':>9} {'ratio':>6} "
          f"{'seq. s':>8} {'speedup':>8} {'cpu ms/call':>11} {'switches/call':>13} {'max in flight':>13} "
          f"{'srv ms/call':>11} {'srv switches/call':>17} {'wake µs':>7}  load avg at start → end")
    results = {}
    for level in levels:
        people = personas(min(sequential, n_personas) if level == 1 else n_personas)
        load, wake = load_average(), wake_cost_us()
        r = await one_run(server, people, level, protocol)
        rate = r["calls"] / r["wall"]
        ideal = level / delay
        sequential_s = r["calls"] * delay
        r.update(rate=rate, ratio=rate / ideal, speedup=sequential_s / r["wall"],
                 cpu_ms=1000 * r["cpu"] / r["calls"])
        results[level] = r
        print(f"{level:>5} {r['personas']:>8} {r['calls']:>6} {r['wall']:>8.2f} {rate:>8.1f} {ideal:>9.1f} "
              f"{r['ratio']:>6.2f} {sequential_s:>8.1f} {r['speedup']:>7.1f}× {r['cpu_ms']:>11.2f} "
              f"{per_call(r['switches'], r['calls']):>13} {r['max_in_flight']:>13} "
              f"{1000 * r['server_cpu'] / max(r['requests'], 1):>11.2f} "
              f"{per_call(r['server_switches'], r['requests']):>17} {wake:>7.0f}  {load} → {load_average()}")
        if r["finished"] != r["personas"] or r["requests"] != r["calls"]:
            print(f"      note: {r['finished']}/{r['personas']} personas finished, {r['requests']} requests "
                  f"for {r['calls']} calls")
    checked, worst = cpu_check(results, n_personas)
    top, mid = max(levels), 32 if 32 in results else sorted(levels)[len(levels) // 2]
    print(f"targets: ratio ≥ 0.8 at C ≤ 128, speedup ≥ 20× at C = 32, framework CPU per call ≤ "
          f"{CPU_TARGET_MS:g} ms below C = 128 and ≤ {CPU_TARGET_AT_SCALE_MS:g} ms from it, at each of C = "
          f"{', '.join(map(str, checked))}")
    per_level = " ".join(f"{'cpu_ms_per_call' if i == 0 else ''}@{level} {results[level]['cpu_ms']:.2f}"
                         for i, level in enumerate(checked))
    print(f"ratio_to_ideal@{top} {results[top]['ratio']:.2f} speedup_vs_sequential@{mid} "
          f"{results[mid]['speedup']:.1f} {per_level} worst {worst:.2f}")
    print(f"{cpu_target_line(results, n_personas)} (load average {load_average()})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--personas", type=int, default=50)
    parser.add_argument("--delay", type=float, default=2.0, help="seconds the server waits before each reply "
                        "(an LLM-like latency; at C = 128 the fixed cost of a 128-reply wave is ~0.3 s)")
    parser.add_argument("--concurrency", default="1,8,32,128", help="comma-separated levels")
    parser.add_argument("--sequential-personas", type=int, default=3, help="personas measured at C = 1")
    parser.add_argument("--judge-protocol", default=default_protocol(JUDGE),
                        help="how the judges are asked (default: as an openai: judge is when none is named)")
    args = parser.parse_args()
    levels = [int(x) for x in args.concurrency.split(",") if x.strip()]
    print(machine())
    _fast_event_loop()  # as `personagraph eval` does
    with fake_server(delay=args.delay) as server:
        asyncio.run(bench(server, args.personas, args.delay, levels, args.sequential_personas,
                          args.judge_protocol))


if __name__ == "__main__":
    main()
