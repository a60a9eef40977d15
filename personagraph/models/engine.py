"""The embedded models' engine: one managed llama.cpp server (``llama-server``) per model, on loopback.

Why a server process, and not llama.cpp inside this process (llama-cpp-python, the previous design):

- A native crash is an error, not the end of the run. llama.cpp segfaulted in ``llama_decode`` on AMX
  CPUs (issue 13) and took the CLI down with it. Now the server dies, the calls in flight fail as
  dropped connections (the model layer retries those), the engine is restarted once, and a second
  death ends the run with one line (:class:`EngineFailed`); the run store keeps every finished call,
  so the same command resumes.
- Continuous batching: the server decodes the requests of all its slots in one batch, so the graph's
  concurrent calls share the CPU instead of waiting for each other (see ``SLOTS``).
- One call path: ``local:`` calls are OpenAI-compatible HTTP calls (``models/openai_http.py``), as
  ``openai:`` calls are.

The binary comes from ``scripts/build_llama_server.sh``: one CPU backend per x86-64 level, the best
one chosen by ggml at start, so it runs on every x86-64 CPU. Starting and stopping is invisible: the
server starts at the first call of its model, on a port the OS picks (``--port 0``; the server logs
the address), writes its log to the cache dir, is stopped at exit and killed by the kernel if this
process dies first (``PR_SET_PDEATHSIG``); it runs in its own session, so Ctrl-C reaches us only.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from personagraph.errors import PersonagraphError
from personagraph.models.openai_http import PermanentModelError, post_json
from personagraph.models.prefixes import (
    SUFFIX,
    SlotPins,
    enough_shared,
    prefix_text,
    prune,
    states_dir,
    system_key,
    token_text,
)
from personagraph.models.providers import PROVIDER_RULES
from personagraph.models.retry import TransientModelError
from personagraph.models.spec import LOCAL_MODELS, LocalModel, parse_spec
from personagraph.models.weights import cache_root, ensure_weights

SERVER_ENV = "PERSONAGRAPH_LLAMA_SERVER"  # path of another llama-server binary (tests, packagers)
# Parallel slots per model and the context of each (PERSONAGRAPH_LLAMA_SLOTS / PERSONAGRAPH_N_CTX).
# 4 slots: the quick run sends up to 5 calls at once to the 1.5B model (one per task) and the server
# batches them into one decode per step; 4 replayed a quick run faster than 1, and 5 no faster than 4
# (docs/benchmarks.md#tried-not-kept). 4096 tokens per slot fit the longest judge prompt plus
# its reply. A slot's KV cache (up to ~115 MB for the 1.5B model) is resident only as far as its prompts
# have filled it: the build zeroes it without touching its pages (scripts/llama-patches/).
SLOTS = int(os.environ.get("PERSONAGRAPH_LLAMA_SLOTS", "4"))
# Host memory for prompts the server keeps beyond its slots (llama.cpp's prompt cache; its default is 8 GiB):
# none. The instructions every persona shares are loaded from saved states on disk (models/prefixes.py),
# the prefix a verdict's calls share stays in its slot, and an embedded run's whole process tree is meant
# to fit in 2.5 GB (bench/embedded.py prints its peak).
CACHE_RAM_MB = 0
CTX_ENV = "PERSONAGRAPH_N_CTX"
CTX_PER_SLOT = int(os.environ.get(CTX_ENV, "4096"))
_CONTEXT_EXCEEDED = "exceeds the available context size"  # llama-server's refusal of a too-long request
# Weight repacking ("extra buffer types") is off: with it the AMX CPU variant died with SIGILL at start-up
# on a KVM Xeon (issue 13; the build now carries no AMX variant, scripts/build_llama_server.sh), and it
# trades prompt speed for decode speed while the eval's embedded calls are prompt-bound
# (docs/benchmarks.md#install, #quick-run).
NO_REPACK = ("--no-repack",)
# No speculative decoding: on 2 cores the 0.5B's own decoding as a draft model costs more than the 1.5B's
# steps it saves (docs/benchmarks.md#tried-not-kept).
# OpenMP threads spin while they wait at ggml's barriers; with more runnable threads than cores (the
# two embedded models decode at the same time in `eval`, and shared machines) a spinning thread burns
# the time slice its sibling needs (docs/benchmarks.md#quick-run). A user's own OMP_WAIT_POLICY is kept.
OPENMP_ENV = {"OMP_WAIT_POLICY": "PASSIVE"}
START_TIMEOUT_S = 180.0
_LISTENING = re.compile(rb"listening on (http://127\.0\.0\.1:\d+)")
_LAUNCHER = """
import ctypes, os, resource, signal, sys
ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
if os.getppid() != int(sys.argv[1]):
    sys.exit(1)  # the parent died before the line above: nobody would end the server
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
os.execv(sys.argv[2], sys.argv[2:])
"""
"""Runs in the server's process between the spawn and llama-server (``python -S -c _LAUNCHER <parent pid>
<server command>``): the server dies with its parent (SIGKILL when the spawning thread's process is gone)
and never dumps core. Not a ``preexec_fn``: with one, Python spawns with fork() instead of vfork(), and
fork() runs OpenBLAS's pthread_atfork handler, which shuts its thread pool down under a matrix product
another thread is running (the embedding model's): that product then spins forever
(OpenMathLib/OpenBLAS#2270, numpy/numpy#30092)."""


class EngineFailed(PersonagraphError):
    """An embedded model's engine died again after its one restart, or could not start.

    A PersonagraphError on purpose: the model layer lets it through, so the run stops with its one
    line (every finished call is already stored) instead of failing each remaining call."""


def explain_refusal(message: str) -> str:
    """A server's error message, with what to change when it refused a request longer than a slot holds."""
    if _CONTEXT_EXCEEDED not in message:
        return message
    return (f"{message} (an embedded model's slot holds {CTX_PER_SLOT} tokens: set ${CTX_ENV} to more; "
            f"each of its {SLOTS} slots can then hold more KV cache in memory)")


def server_path() -> Path:
    """The llama-server binary: ``$PERSONAGRAPH_LLAMA_SERVER``, else the one installed in this venv."""
    override = os.environ.get(SERVER_ENV)
    return Path(override) if override else Path(sys.prefix) / "lib" / "personagraph-llama" / "llama-server"


def server_env(binary: Path) -> dict[str, str]:
    """The environment to run ``binary`` in: its shared libraries lie beside it (the build sets no RPATH
    to its install folder), OpenMP waits passively (see ``OPENMP_ENV``)."""
    libraries = os.pathsep.join(filter(None, [str(binary.parent), os.environ.get("LD_LIBRARY_PATH")]))
    return {**OPENMP_ENV, **os.environ, "LD_LIBRARY_PATH": libraries}


def is_built() -> bool:
    """Whether the llama-server binary is installed."""
    return server_path().is_file()


def _threads() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 2


def _describe(returncode: int) -> str:
    """``SIGSEGV``, ``SIGKILL``, … for a death by signal, else the exit code."""
    if returncode < 0:
        try:
            return signal.Signals(-returncode).name
        except ValueError:
            return f"signal {-returncode}"
    return f"exit code {returncode}"


class Engine:
    """One embedded model's llama-server: started on demand, restarted once after a death."""

    def __init__(self, model: LocalModel, slots: int = SLOTS, extra_args: tuple[str, ...] = ()) -> None:
        """``extra_args``: more llama-server arguments, for tests and benches that set a server option; the
        engines of a run take none."""
        self.model = model
        self.slots = slots
        self.extra_args = extra_args
        self.deaths: list[str] = []  # how each earlier process ended (SIGSEGV, SIGKILL, exit code 1, …)
        self.log_path = cache_root() / "logs" / f"llama-server-{model.name}-{os.getpid()}.log"
        self._process: subprocess.Popen[bytes] | None = None
        self._url = ""
        self._failure = ""
        self._lock = threading.Lock()
        self._pins = SlotPins(slots, None)  # replaced at each start: a new server's slots are empty
        # Its server is spawned by this long-lived thread of its own: PR_SET_PDEATHSIG fires when the
        # *thread* that forked the child ends, so a short-lived worker thread (asyncio.to_thread, one
        # loop's executor) would take the server down with it; one per engine, so a call to one model
        # never waits behind another model's loading.
        self._spawner = ThreadPoolExecutor(1, thread_name_prefix=f"personagraph-engine-{model.name}")

    @property
    def spec(self) -> str:
        return f"local:{self.model.name}"

    @property
    def pid(self) -> int | None:
        """The running server's process id (None before the first call or after a death)."""
        process = self._process
        return process.pid if process is not None and process.poll() is None else None

    async def base_url(self) -> str:
        """The server's OpenAI-compatible base URL (``http://127.0.0.1:PORT/v1``), started if needed.

        Raises:
            EngineFailed: the engine died twice (or cannot start); the message names model and log.
        """
        if self.pid is not None and self._url:  # running and ready; while it loads, wait for it below
            return self._url
        return await asyncio.wrap_future(self._spawner.submit(self._ensure))

    def start_soon(self) -> None:
        """Starts the server in the background, so the model loads while this process does other work (the
        first call then finds it ready). A start that fails is reported by the first call, as without."""
        if self.pid is None and not self._failure:
            self._spawner.submit(self._ensure_quietly)

    def _ensure_quietly(self) -> None:
        try:
            self._ensure()
        except EngineFailed:  # recorded in self._failure: the first call raises it
            pass

    def _ensure(self) -> str:
        with self._lock:
            while True:
                if self._failure:
                    raise EngineFailed(self._failure)
                if self._process is not None:
                    if self._process.poll() is None:
                        return self._url
                    self.deaths.append(_describe(self._process.returncode))
                    self._process = None
                if len(self.deaths) >= 2:
                    self._failure = (f"{self.spec}: the llama.cpp engine died twice "
                                     f"({', '.join(self.deaths)}); see {self.log_path}")
                    raise EngineFailed(self._failure)
                self._start()  # returns when ready, or when the process died (recorded on the next turn)

    def _start(self) -> None:
        binary = server_path()
        if not binary.is_file():
            self._failure = (f"{self.spec} needs llama.cpp's server, which is not built ({binary} is "
                             "missing); build it with: bash scripts/build_llama_server.sh")
            raise EngineFailed(self._failure)
        try:
            weights = ensure_weights(self.model)
        except PersonagraphError as exc:  # missing weight packages: every call would fail the same way
            self._failure = str(exc)
            raise EngineFailed(self._failure) from None
        threads = str(_threads())
        folder = _states_folder(weights, binary, self.extra_args)
        command = [
            str(binary), "--model", str(weights), "--host", "127.0.0.1", "--port", "0",
            "--parallel", str(self.slots), "--ctx-size", str(self.slots * CTX_PER_SLOT),
            "--threads", threads, "--threads-batch", threads, "--cache-ram", str(CACHE_RAM_MB),
            "--no-webui", "--log-timestamps", *NO_REPACK, *self.extra_args,
            *(["--slot-save-path", str(folder)] if folder is not None else []),
        ]
        self._pins = SlotPins(self.slots, folder)
        self._url = ""  # not ready: no call is sent to the old process's address while this one loads
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            offset = log.tell()
            started = time.strftime("%Y-%m-%d %H:%M:%S")
            log.write(f"--- {started} personagraph: {' '.join(command)}\n".encode())
            log.flush()
            self._process = subprocess.Popen(  # no preexec_fn: Python then spawns with vfork (_LAUNCHER)
                [sys.executable, "-S", "-c", _LAUNCHER, str(os.getpid()), *command], stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT, env=server_env(binary), start_new_session=True,
            )
        self._url = self._wait_ready(offset)

    @contextlib.asynccontextmanager
    async def pinned(
        self, messages: Sequence[Mapping[str, Any]] | None = None, tokens: Sequence[int] | None = None
    ) -> AsyncIterator[tuple[str, dict[str, int]]]:
        """The server's base URL and the body fields that send one request (chat ``messages``, or a prompt
        of ``tokens``) to the free slot whose cache shares the longest prefix with it. A system message's
        saved state is loaded into the slot first when the slot lacks it, and saved after the first request
        that finishes with it (:mod:`personagraph.models.prefixes`). Waits while every slot is busy."""
        url = await self.base_url()
        pins, key = self._pins, system_key(messages)
        text = prefix_text(messages) if messages is not None else token_text(tokens)
        first = enough_shared(messages, text)
        slot, shared = await pins.take(text, enough=first)
        holds: str | None = None
        try:
            state = pins.saved(key) if key is not None and shared < first else None
            if state is not None and await _slot_action(url, slot, "restore", state.name):
                with contextlib.suppress(OSError):  # pruned meanwhile by another process: loaded all the same
                    os.utime(state)  # recently used: pruned last
            yield url, {"id_slot": slot}
            holds = text
            if key and (folder := pins.claim_save(key)) is not None:
                try:
                    await _save_state(url, slot, key, folder)
                finally:
                    pins.saving_done(key)
        finally:
            pins.give_back(slot, holds)

    def _wait_ready(self, offset: int) -> str:
        """Waits for the server's "listening on" line (logged once the model is loaded), then /health."""
        assert self._process is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        url = ""
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                return ""
            if not url:
                with self.log_path.open("rb") as log:
                    log.seek(offset)
                    if found := _LISTENING.search(log.read()):
                        url = found.group(1).decode()
            if url and _healthy(url):
                return url + "/v1"
            time.sleep(0.05)
        self._kill()
        self._failure = f"{self.spec}: the llama.cpp engine did not start within {START_TIMEOUT_S:.0f}s; " \
                        f"see {self.log_path}"
        raise EngineFailed(self._failure)

    def _kill(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def stop(self) -> None:
        """Stops the server (idempotent); the next call starts a new one. Its log is removed unless it
        has died before: then the log is what the error message points to."""
        with self._lock:
            self._kill()
            if not self.deaths:
                self.log_path.unlink(missing_ok=True)


def _states_folder(weights: Path, binary: Path, extra_args: tuple[str, ...]) -> Path | None:
    """The folder of the model's saved prefixes, created (the server checks it at start), the saved states
    of every model pruned; None when it cannot be made (the engine then saves none and reads every prompt
    whole)."""
    try:
        folder = states_dir(weights, binary, CTX_PER_SLOT, extra_args)
        folder.mkdir(parents=True, exist_ok=True)
        prune(folder.parent)
    except OSError:
        return None
    return folder


async def _slot_action(url: str, slot: int, action: str, filename: str) -> bool:
    """``POST /slots/{slot}?action=save|restore``; False when the server refused or failed (a saved
    prefix is an optimisation: the request then reads its prompt whole)."""
    root = url.removesuffix("/v1")
    try:
        await post_json(f"{root}/slots/{slot}?action={action}", {"filename": filename}, timeout_s=60)
    except (TransientModelError, PermanentModelError):
        return False
    return True


async def _save_state(url: str, slot: int, key: str, folder: Path) -> None:
    """Saves ``slot``'s state as ``key``'s, whole or not at all (written under another name, then
    renamed), and prunes the saved states of every model to their budget."""
    partial = f"{key}.{os.getpid()}.partial"
    try:
        folder.mkdir(parents=True, exist_ok=True)  # again, if pruned as empty since the start
        if await _slot_action(url, slot, "save", partial):
            os.replace(folder / partial, folder / f"{key}{SUFFIX}")
            prune(folder.parent)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):  # a folder that could not be made holds no partial file
            (folder / partial).unlink(missing_ok=True)


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/health", timeout=2) as reply:
            return reply.status == 200
    except OSError:
        return False


_engines: dict[str, Engine] = {}
_engines_lock = threading.Lock()


def engine_for(name: str) -> Engine:
    """The process-wide engine of the embedded model ``name`` (created on first use, started lazily)."""
    with _engines_lock:
        if name not in _engines:
            _engines[name] = Engine(LOCAL_MODELS[name])
        return _engines[name]


def start_engines(specs: Iterable[str]) -> None:
    """Starts, in the background, the engines of the embedded models among ``specs`` (model specs; other
    providers, plug-ins and unparsable names are skipped), each on its own thread. A run calls it as it
    begins: the quick run's 1.5B loads during the seconds the persona's shortlist takes to embed."""
    for text in specs:
        try:
            spec = parse_spec(text)
        except PersonagraphError:
            continue
        if PROVIDER_RULES[spec.provider].transport == "engine":  # as ModelClient routes it
            engine_for(spec.name).start_soon()


def stop_engines() -> None:
    """Stops every engine of this process (at exit; tests call it too)."""
    with _engines_lock:
        engines = list(_engines.values())
    for engine in engines:
        engine.stop()


atexit.register(stop_engines)


def _forget_engines_after_fork() -> None:  # pragma: no cover - in a forked child
    """A forked child does not own its parent's servers: it starts its own when it needs them."""
    _engines.clear()


os.register_at_fork(after_in_child=_forget_engines_after_fork)
