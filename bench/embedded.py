"""Embedded models: the README's quick run on the current engine against the previous design, and a crash.

One process, one machine, three runs of ``personagraph eval --persona … --quick`` (the CLI, in process),
each in a fresh run directory with freshly started engines (start-up and model loading included):

1. **current**: one llama-server per model with ``SLOTS`` parallel slots (continuous batching); the graph
   sends as many calls at once as a model has slots.
2. **previous design**: llama-cpp-python in process, one inference at a time across all embedded models
   (a process-wide lock). That engine is gone, so it is emulated with the same llama-server binary at
   1 slot per model and a process-wide lock around every embedded call: the same models, prompts and
   token counts, one inference at a time. (The in-process engine saved the HTTP hop, ~1 ms a call.)
3. **crash**: run 1 again on another persona, with the judge/generator engine SIGKILLed once after a few
   calls finished: ``crash_recovered yes`` when the run still finishes with as many verdicts as run 1.

Throughput counts only useful tokens: a reply rejected by validation and the format retry that
replaced it are reported apart (``format_retry_tokens``) and left out of tokens/s.

    .venv/bin/python bench/embedded.py [--persona "…"]

Last line: ``quick_run_s <s> previous_design_s <s> speedup <x> crash_recovered <yes|no>``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sqlite3
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._harness import machine  # noqa: E402
from personagraph.cli import app  # noqa: E402
from personagraph.models import LOCAL_MODELS, openai_http  # noqa: E402
from personagraph.models import engine as engine_module  # noqa: E402
from personagraph.store import RunStore  # noqa: E402

COWBOY = "A 70-year-old retired cowboy from Texas"
CRASH_PERSONA = "A 52-year-old night-shift nurse from Glasgow"
JUDGE = "qwen2.5-coder-1.5b"  # the default judge and generator
RETRY_MARK = "That reply was not valid"  # the model layer's format-retry prompt (models/client.py)


@dataclass
class RunFigures:
    wall_s: float
    exit_code: int
    calls: int
    verdicts_ok: int
    verdicts: int
    useful_tokens: int
    format_retry_tokens: int

    def line(self, label: str) -> str:
        rate = self.useful_tokens / self.wall_s if self.wall_s else 0.0
        return (f"  {label:>16}: {self.wall_s:6.1f}s  exit {self.exit_code}  {self.calls} calls  "
                f"verdicts {self.verdicts_ok}/{self.verdicts}  {self.useful_tokens} useful output tokens "
                f"= {rate:.1f} tok/s  (format retries: {self.format_retry_tokens} tokens, not counted)")


def read_figures(run_dir: Path, wall_s: float, exit_code: int) -> RunFigures:
    """Calls, verdicts and token counts from the run store."""
    store = RunStore(run_dir, readonly=True)
    try:
        calls = [(request["messages"], row.output_tokens) for row, request in store.calls()]
        verdicts = store.records("verdict")
    finally:
        store.close()
    by_messages = {json.dumps(messages, sort_keys=True): tokens for messages, tokens in calls}
    wasted = 0
    for messages, tokens in calls:
        if len(messages) >= 3 and str(messages[-1].get("content", "")).startswith(RETRY_MARK):
            replaced = json.dumps(messages[:-2], sort_keys=True)
            wasted += tokens + by_messages.get(replaced, 0)  # the retry and the reply it replaced
    total = sum(tokens for _, tokens in calls)
    return RunFigures(wall_s, exit_code, len(calls), sum(v.get("status") == "ok" for v in verdicts),
                      len(verdicts), total - wasted, wasted)


def quick_run(run_dir: Path, persona: str, during: Callable[[], None] | None = None) -> RunFigures:
    """``personagraph eval --persona P --quick`` in this process, on fresh engines; ``during`` runs in a
    thread meanwhile."""
    engine_module.stop_engines()
    thread = threading.Thread(target=during, daemon=True) if during else None
    started = time.perf_counter()
    if thread:
        thread.start()
    try:
        app(["-q", "eval", "--persona", persona, "--quick", "--run-dir", str(run_dir)], standalone_mode=False)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    except Exception as exc:  # noqa: BLE001 - typer.Exit and friends carry the exit code
        code = int(getattr(exc, "exit_code", 1))
    wall = time.perf_counter() - started
    if thread:
        thread.join(30)
    return read_figures(run_dir, wall, code)


@contextmanager
def previous_design() -> Iterator[None]:
    """One slot per model and one embedded call at a time across all models (see the module docstring)."""
    original_chat = openai_http.chat_completion
    locks: dict[int, asyncio.Lock] = {}

    async def one_at_a_time(base_url: str, api_key: str, body: dict[str, Any], **kwargs: Any) -> Any:
        lock = locks.setdefault(id(asyncio.get_running_loop()), asyncio.Lock())
        async with lock:
            return await original_chat(base_url, api_key, body, **kwargs)

    engine_module.stop_engines()
    engine_module._engines.clear()
    for name, model in LOCAL_MODELS.items():
        engine_module._engines[name] = engine_module.Engine(model, slots=1)
    openai_http.chat_completion = one_at_a_time
    try:
        yield
    finally:
        openai_http.chat_completion = original_chat
        engine_module.stop_engines()
        engine_module._engines.clear()


def kill_once(run_dir: Path, after_calls: int, killed: list[str]) -> Callable[[], None]:
    """A thread body: SIGKILL the judge's engine once the run has stored ``after_calls`` calls."""

    def body() -> None:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            pid = engine_module.engine_for(JUDGE).pid
            try:
                db = sqlite3.connect(run_dir / "run.sqlite", timeout=5)
                done = db.execute("SELECT count(*) FROM calls").fetchone()[0]
                db.close()
            except sqlite3.Error:
                done = 0
            if pid is not None and done >= after_calls:
                os.kill(pid, signal.SIGKILL)
                killed.append(f"pid {pid} after {done} calls")
                return
            time.sleep(0.2)

    return body


def main(persona: str, keep: Path | None = None) -> None:
    print(machine(), flush=True)
    print(f"engine: {engine_module.server_path()}, {engine_module.SLOTS} slots per model, "
          f"{engine_module.CTX_PER_SLOT} tokens of context per slot", flush=True)
    for model in LOCAL_MODELS.values():  # assembled before timing: the first install does this once
        engine_module.ensure_weights(model)
    with tempfile.TemporaryDirectory(prefix="pg-bench-embedded-") as tmp:
        root = keep or Path(tmp)
        current = quick_run(root / "current", persona)
        print(current.line("current"), flush=True)
        with previous_design():
            previous = quick_run(root / "previous", persona)
        print(previous.line("previous design"), flush=True)
        killed: list[str] = []
        crash = quick_run(root / "crash", CRASH_PERSONA, kill_once(root / "crash", 6, killed))
        print(crash.line("crash"), f"killed: {', '.join(killed) or 'nothing'}", flush=True)
    engine_module.stop_engines()
    # recovered: killed mid-run, and the run still finished with as many verdicts as the undisturbed one
    recovered = bool(killed) and crash.exit_code == 0 and crash.verdicts == current.verdicts > 0
    print(f"load average at end {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"quick_run_s {current.wall_s:.1f} previous_design_s {previous.wall_s:.1f} "
          f"speedup {previous.wall_s / current.wall_s:.2f} crash_recovered {'yes' if recovered else 'no'}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--persona", default=COWBOY)
    parser.add_argument("--keep", type=Path, default=None,
                        help="keep the three run directories here (e.g. for judge-check --from KEEP/current)")
    args = parser.parse_args()
    main(args.persona, args.keep)
