"""Shared by the benchmark scripts: the machine line, the fake OpenAI server in its own process, call
tracing, CPU clocks and context switches, deterministic personas."""

from __future__ import annotations

import json
import os
import platform
import resource
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _cpu_info() -> tuple[str, set[str]]:
    """The CPU model name and flag set from /proc/cpuinfo (empty where it is not Linux)."""
    model, flags = platform.processor() or platform.machine(), set()
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return model, flags
    for row in text.splitlines():
        key, _, value = row.partition(":")
        if key.strip() == "model name" and value.strip():
            model = value.strip()
        elif key.strip() == "flags":
            flags = set(value.split())
    return model, flags


def wilson_share(count: int, total: int) -> str:
    """``count/total = share [95% CI low, high]``, the interval Wilson's (scipy), as the benches print a
    proportion ("0/0" for none)."""
    from scipy.stats import binomtest

    if total == 0:
        return "0/0"
    ci = binomtest(count, total).proportion_ci(method="wilson")
    return f"{count}/{total} = {count / total:.2f} [95% CI {ci.low:.2f}, {ci.high:.2f}]"


def load_average() -> str:
    """The 1/5/15-minute load averages, as ``uptime`` prints them."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def cpu() -> str:
    """The CPU a figure was measured on: model, cores, AVX-512/AMX."""
    model, flags = _cpu_info()
    avx512 = "yes" if "avx512f" in flags else "no"
    amx = "yes" if {"amx_tile", "amx_bf16"} & flags else "no"
    return f"{model}, {os.cpu_count()} cores, AVX-512 {avx512}, AMX {amx}"


def machine() -> str:
    """One line naming the machine a figure was measured on: :func:`cpu` and the load now.

    Every bench prints it first; the machine may be shared, so the load is part of every figure.
    """
    return f"machine: {cpu()}, load average {load_average()} (at start)"


def wake_cost_us(sleeps: int = 12, asleep_s: float = 0.25) -> float:
    """Median CPU (µs) billed to a thread that only sleeps ``asleep_s`` and wakes: what the machine charges
    for one sparse wake-up. On a VM it varies with the host's load, which no load average inside shows, and
    every CPU-per-call figure at low concurrency moves with it; benches print it beside their figures."""
    billed = []
    for _ in range(sleeps):
        started = time.thread_time()
        time.sleep(asleep_s)
        billed.append(time.thread_time() - started)
    return 1e6 * sorted(billed)[len(billed) // 2]


@dataclass
class ServerProcess:
    """bench/fake_openai.py running in a child process (its CPU is not ours)."""

    process: subprocess.Popen[str]
    base_url: str

    @property
    def root(self) -> str:
        return self.base_url.removesuffix("/v1")

    def stats(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"{self.root}/stats", timeout=10) as reply:
            return json.load(reply)

    def reset(self) -> None:
        request = urllib.request.Request(f"{self.root}/stats/reset", method="POST", data=b"")
        urllib.request.urlopen(request, timeout=10).close()

    def cpu_s(self) -> float:
        """User + system CPU seconds the server process has used (Linux /proc)."""
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def switches(self) -> Switches:
        """The server's context switches so far, summed over its threads (Linux /proc)."""
        total = Switches(0, 0)
        for status in Path(f"/proc/{self.process.pid}/task").glob("*/status"):
            try:
                fields = dict(row.split(":", 1) for row in status.read_text().splitlines() if ":" in row)
            except OSError:  # a thread that ended while we read
                continue
            total += Switches(int(fields["voluntary_ctxt_switches"]),
                              int(fields["nonvoluntary_ctxt_switches"]))
        return total


@dataclass(frozen=True)
class Switches:
    """Context switches: voluntary (the thread slept: a wake-up each) and involuntary (it was preempted).

    A count of wake-ups, unlike CPU time, does not depend on how busy or cold the machine is.
    """

    voluntary: int
    involuntary: int

    def __add__(self, other: Switches) -> Switches:
        return Switches(self.voluntary + other.voluntary, self.involuntary + other.involuntary)

    def __sub__(self, other: Switches) -> Switches:
        return Switches(self.voluntary - other.voluntary, self.involuntary - other.involuntary)


def own_switches() -> Switches:
    """This process's context switches so far, every thread included (ended ones too)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return Switches(usage.ru_nvcsw, usage.ru_nivcsw)


@contextmanager
def fake_server(**options: Any) -> Iterator[ServerProcess]:
    """Starts ``bench/fake_openai.py --port 0 --<option> <value> …`` (``--<flag>`` for a True option); stops
    it on exit."""
    args = [sys.executable, str(ROOT / "bench" / "fake_openai.py"), "--port", "0"]
    for name, value in options.items():
        flag = f"--{name.replace('_', '-')}"
        args += [flag] if value is True else [] if value is False else [flag, str(value)]
    process = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline() if process.stdout else ""
        if not line.startswith("listening on "):
            raise RuntimeError(f"the fake server did not start: {line!r}")
        yield ServerProcess(process, line.split()[-1])
    finally:
        process.terminate()
        process.wait(timeout=10)


@dataclass
class CallTrace:
    """Start and end times of every request sent to a provider (retries included)."""

    spans: list[tuple[str, float, float]] = field(default_factory=list)

    def chain(self, slack_s: float = 0.002) -> int:
        """Length of the longest chain of requests each sent after the previous one answered: the
        round trips that happened one after another (the critical path when concurrency is ample)."""
        spans = sorted(self.spans, key=lambda s: s[2])
        depth: list[int] = []
        for i, (_, start, _) in enumerate(spans):
            before = [depth[j] for j in range(i) if spans[j][2] <= start + slack_s]
            depth.append(1 + max(before, default=0))
        return max(depth, default=0)

    def window(self) -> float:
        """From the first request sent to the last reply received."""
        if not self.spans:
            return 0.0
        return max(s[2] for s in self.spans) - min(s[1] for s in self.spans)


@contextmanager
def trace_calls() -> Iterator[CallTrace]:
    """Records every provider request of :class:`ModelClient` while active."""
    from personagraph.models.client import ModelClient

    trace = CallTrace()
    original = ModelClient._send

    async def traced(self: ModelClient, *args: Any) -> Any:
        started = time.perf_counter()
        try:
            return await original(self, *args)
        finally:
            trace.spans.append((self.role, started, time.perf_counter()))

    ModelClient._send = traced  # type: ignore[method-assign]
    try:
        yield trace
    finally:
        ModelClient._send = original  # type: ignore[method-assign]


def personas(n: int, offset: int = 0) -> list[Any]:
    """``n`` distinct personas (deterministic)."""
    from personagraph.schemas import Persona

    jobs = ("baker", "nurse", "pilot", "farmer", "teacher", "welder", "poet", "judge", "chef", "miner")
    towns = ("Lyon", "Austin", "Osaka", "Lagos", "Quito", "Perth", "Oslo", "Pune", "Cork", "Kyiv")
    return [Persona(description=f"A {20 + (i * 7) % 60}-year-old {jobs[i % 10]} from {towns[(i // 10) % 10]}"
                                f" (#{i})") for i in range(offset, offset + n)]


def serve_embedded(name: str) -> str:
    """Starts llama-server with the embedded model ``name`` (kept until this process ends) and returns its
    OpenAI-compatible base URL: the offline stand-in for an API judge, judged through the ``openai:`` path."""
    import asyncio

    from personagraph.models.engine import engine_for

    url = asyncio.run(engine_for(name).base_url())
    print(f"serving local:{name} at {url}", flush=True)
    return url
