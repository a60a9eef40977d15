"""SIGTERM and SIGINT at random moments of ``eval``, ``simulate`` and ``meta-eval``: every process must exit
within a few seconds with its resume line, and the resumed run must equal an uninterrupted one.

For each command, an uninterrupted reference run gives its summary and wall time; then each trial starts the
command on a fresh run directory, sends SIGTERM or SIGINT at a random moment of that wall time (half the processes
start with SIGINT ignored, as a job a script starts with ``&``; some after a second process on the same
directory was refused by the run lock: the sequence of a hang seen once; some with a second process started
at the same moment on the same new directory, both signalled: one runs, the other is refused in one line or
signalled too, and neither removes what the other made),
waits ``--deadline`` seconds for the exit, and runs the command again to finish it. A process still alive at
the deadline is a hang: its threads' stacks are dumped (``faulthandler`` on SIGABRT) into the report and it
is killed. Passes when every trial exited in time with the right code and line and every resume equals the
reference (all summary fields but timings and counts of calls).

    .venv/bin/python bench/signal_stress.py [--trials 20] [--commands eval,simulate,meta-eval]
        [--models test|openai] [--deadline 5] [--seed 0]

``--models test``: deterministic ``test:slow*`` models in the process; ``openai``: ``openai:*`` specs against
``bench/fake_openai.py`` (``--delay`` seconds per reply) on 127.0.0.1. Judges are asked with their default
protocol (``evidence``: its likelihood features on worker threads, read from the deterministic test scorer,
``$PERSONAGRAPH_LIKELIHOOD_MODEL=test``, never the embedded model) or ``--protocol rationale``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._harness import ROOT, fake_server, machine  # noqa: E402
from personagraph.store import RunLock  # noqa: E402

EXIT_LINE = "run the same command again to resume"
VOLATILE = {"wall_time_s", "llm_calls", "cache_hits", "roles", "retried", "recovered", "run_dir", "tokens"}


@dataclass
class Trial:
    command: str
    signal_name: str
    at_s: float
    lock_refused: bool
    exit_s: float | None  # None: still alive at the deadline
    code: int | None
    said_resume: bool
    resume_equal: bool | None = None
    stacks: str = ""
    detail: str = ""  # when not ok: the first process's last line, the resume's exit and what differs
    together: Ending | None = None  # the second process started at the same moment, when there was one
    lost_race: bool = False  # refused by the run lock: a second process took the directory first

    @property
    def at_start_up(self) -> bool:
        """Ended by the signal itself (-15, -2): it came while Python imported the package, before the command's
        handler was in place; nothing is stored by then (the resume shows it)."""
        return self.code in (-signal.SIGTERM, -signal.SIGINT)

    @property
    def ok(self) -> bool:
        first = Ending(self.exit_s, self.code, self.said_resume, refused=self.lost_race)
        return first.ok and (self.together is None or self.together.ok) and self.resume_equal is not False


@dataclass
class Ending:
    """How one signalled process ended: in time, and with 0 (it finished first), 130/143 and the resume line,
    -2/-15 (signalled while Python started) or, for a second process on the directory, 2 and the one line
    of the run lock."""

    exit_s: float | None
    code: int | None
    said_resume: bool
    refused: bool  # exit 2 with the run lock's "in use by" line

    @property
    def ok(self) -> bool:
        handled = self.code in (130, 143) and self.said_resume
        at_start_up = self.code in (-signal.SIGTERM, -signal.SIGINT)
        return self.exit_s is not None and (self.code == 0 or handled or at_start_up or self.refused)


def commands(models: str, base_url: str | None, items: Path, protocol: str) -> dict[str, list[str]]:
    """The command lines of each run kind (without ``--run-dir``)."""
    agent, judge, user = (("test:slow-agent", "test:slow-judge", "test:slow-user") if models == "test" else
                          ("openai:agent", "openai:judge", "openai:user"))
    endpoint = ["--base-url", base_url] if base_url else []
    protocol = ["--judge-protocol", "rationale"] if protocol == "rationale" else []
    return {
        "eval": ["eval", "--persona", "A retired cowboy from Texas", "--persona", "A night-shift nurse",
                 "-m", agent, "-j", judge, "--environments", "2", "--questions-per-task", "1",
                 "--concurrency", "2", *protocol, *endpoint],
        "simulate": ["simulate", "--persona", "A pediatric nurse", "-m", agent, "-j", judge, "--user-model", user,
                     "--turns", "3", "--sessions", "2", "--concurrency", "2", *endpoint],
        "meta-eval": ["meta-eval", "--items", str(items), "-j", judge, "--concurrency", "2", *protocol, *endpoint],
    }


def summary(run_dir: Path, command: str) -> object:
    """The comparable part of a run's summary: every field but timings and call counts."""
    name = {"meta-eval": "meta_eval.json"}.get(command, "summary.json")
    path = run_dir / name
    if not path.exists():
        path = next(run_dir.glob("*summary.json"), path)
    data = json.loads(path.read_text())

    def strip(value: object) -> object:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in VOLATILE}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return strip(data)


def _ignore_sigint() -> None:  # in the child: what a job a script starts with `&` inherits
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def start(args: list[str], run_dir: Path, env: dict[str, str], sigint_ignored: bool) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-X", "faulthandler", "-m", "personagraph.cli", "-q", *args,
                             "--run-dir", str(run_dir)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, env=env, cwd=ROOT, preexec_fn=_ignore_sigint if sigint_ignored else None)


MODES = ("alone", "refused", "together")
"""A trial's process runs alone; after a second writer on its directory was refused; or started together
with a second one on the same new directory, both signalled."""


def trial(command: str, args: list[str], wall_s: float, reference: object, folder: Path, rng: random.Random,
          deadline_s: float, env: dict[str, str], index: int, mode: str) -> Trial:
    run_dir = folder / f"{command}-{index}"
    sigint_ignored = rng.random() < 0.5  # then only SIGTERM can end it
    signum = signal.SIGTERM if sigint_ignored else rng.choice([signal.SIGTERM, signal.SIGINT])
    at = rng.uniform(0.0, wall_s * 1.1)
    lock_refused = mode == "refused"
    process = start(args, run_dir, env, sigint_ignored)
    other = start(args, run_dir, env, sigint_ignored) if mode == "together" else None
    started = time.monotonic()
    if lock_refused:  # a second writer on the same directory, refused by the run lock, before the signal
        while RunLock.holder(run_dir) is None and process.poll() is None and time.monotonic() - started < at:
            time.sleep(0.02)  # the second starts once the first holds the directory
        second = subprocess.run([sys.executable, "-m", "personagraph.cli", "-q", *args, "--run-dir", str(run_dir)],
                                capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
        lock_refused = second.returncode == 2 and "in use by" in second.stderr
    time.sleep(max(0.0, at - (time.monotonic() - started)))
    sent = time.monotonic()
    for each in (process, other):
        if each is not None and each.poll() is None:
            each.send_signal(signum)
    exit_s, stderr = _ended(process, sent, deadline_s)
    name = signal.Signals(signum).name + (" (SIGINT ignored)" if sigint_ignored else "")
    result = Trial(command, name, round(at, 2), lock_refused, exit_s, process.returncode,
                   EXIT_LINE in (stderr or ""), stacks=(stderr or "")[-6000:] if exit_s is None else "")
    result.lost_race = _refused(process.returncode, stderr)  # a second writer took the directory first
    if other is not None:
        other_exit_s, other_stderr = _ended(other, sent, deadline_s)
        result.together = Ending(other_exit_s, other.returncode, EXIT_LINE in (other_stderr or ""),
                                 _refused(other.returncode, other_stderr))
        if not result.together.ok:
            result.stacks += (other_stderr or "")[-3000:]
    resumed = subprocess.run([sys.executable, "-m", "personagraph.cli", "-q", *args, "--run-dir", str(run_dir)],
                             capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    got = summary(run_dir, command) if resumed.returncode in (0, 3) else None
    result.resume_equal = resumed.returncode == 0 and got == reference
    if not result.resume_equal or not result.ok:
        differs = sorted(k for k in set(got or {}) | set(reference) if (got or {}).get(k) != reference.get(k)) \
            if isinstance(reference, dict) and isinstance(got, dict) else []
        last = (stderr or "").strip().splitlines()[-1:] or [""]
        result.detail = (f"first: {last[0][:200]!r}; resume exit {resumed.returncode}: "
                         f"{resumed.stderr.strip()[-300:]!r}; differs: {differs}")
    return result


ENV = {**os.environ, "OPENAI_API_KEY": "sk-signal-stress", "PYTHONFAULTHANDLER": "1",
       "PERSONAGRAPH_LIKELIHOOD_MODEL": "test"}


def reference_run(command: str, args: list[str], folder: Path, env: dict[str, str]) -> tuple[float, object]:
    """An uninterrupted run of the command: its wall time and comparable summary (RuntimeError: it failed)."""
    reference_dir = folder / f"{command}-reference"
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "personagraph.cli", "-q", *args, "--run-dir",
                           str(reference_dir)], capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"{command}: the reference run failed (exit {done.returncode}): "
                           f"{done.stderr[-500:]}")
    return time.monotonic() - started, summary(reference_dir, command)


def _refused(code: int | None, stderr: str | None) -> bool:
    """Whether a process ended as the run lock refuses a second writer: exit 2 and its one line."""
    lines = [line for line in (stderr or "").splitlines() if line.strip()]
    return code == 2 and len(lines) == 1 and "in use by" in lines[0]


def _ended(process: subprocess.Popen[str], sent: float, deadline_s: float) -> tuple[float | None, str]:
    """Waits for a signalled process: seconds from the signal to its exit (None: alive at the deadline, then
    its threads' stacks are taken and it is killed) and its stderr."""
    try:
        _, stderr = process.communicate(timeout=deadline_s)
        return time.monotonic() - sent, stderr
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGABRT)  # faulthandler: every thread's stack on stderr
        _, stderr = process.communicate(timeout=30)
        return None, stderr


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20, help="trials per command")
    parser.add_argument("--commands", default="eval,simulate,meta-eval")
    parser.add_argument("--models", choices=["test", "openai"], default="test")
    parser.add_argument("--delay", type=float, default=0.1, help="seconds per fake-server reply (--models openai)")
    parser.add_argument("--deadline", type=float, default=5.0, help="seconds a signalled process may take to exit")
    parser.add_argument("--protocol", choices=["default", "rationale"], default="default")
    parser.add_argument("--seed", type=int, default=0)
    options = parser.parse_args()
    rng = random.Random(options.seed)
    print(machine())
    failed = 0
    with ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="signal-stress-")))
        base_url = None
        if options.models == "openai":
            base_url = stack.enter_context(fake_server(delay=options.delay)).base_url
        env = ENV
        lines = commands(options.models, base_url, ROOT / "bench" / "meta_eval_sample" / "items.jsonl",
                         options.protocol)
        for command in options.commands.split(","):
            args = lines[command]
            try:
                wall, reference = reference_run(command, args, folder, env)
            except RuntimeError as exc:
                print(exc)
                return 1
            trials = [trial(command, args, wall, reference, folder, rng, options.deadline, env, i,
                            MODES[i % len(MODES)]) for i in range(options.trials)]
            exits = [t.exit_s for t in trials if t.exit_s is not None]
            bad = [t for t in trials if not t.ok]
            failed += len(bad)
            print(f"{command}: reference {wall:.1f} s · {len(trials)} trials "
                  f"({sum(t.lock_refused for t in trials)} after a refused second writer, "
                  f"{sum(t.together is not None for t in trials)} with a second started together, "
                  f"{sum(t.at_start_up for t in trials)} during start-up) · "
                  f"exited {len(exits)}/{len(trials)}, slowest {max(exits, default=0):.2f} s · "
                  f"resume equal {sum(bool(t.resume_equal) for t in trials)}/{len(trials)} · not ok {len(bad)}")
            for t in bad:
                print(f"  NOT OK {t}")
                if t.stacks:
                    print(t.stacks)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
