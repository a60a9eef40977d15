"""Saved prompt prefixes of the embedded models: a system message read once, then loaded by every later run.

Most of an embedded model's prompt tokens are instructions that do not depend on the persona: a task's
question-writing rules, the settings pool, a judge's instructions. llama-server saves a slot's state (its
tokens and their KV cache) to a file and loads it into any slot (``--slot-save-path``,
``POST /slots/N?action=save|restore``); a request sent to that slot (``id_slot``) then reads only the tokens
after the longest prefix it shares with the loaded ones. The server compares the tokens one by one, so a
state that matches nothing costs a read of the file, never a wrong answer.

:class:`SlotPins` keeps, per server, which slot is busy and which text its cache begins with: a request
goes to the free slot whose cache shares the longest prefix with it, and waits while none is free. A system
message of at least ``MIN_SYSTEM_CHARS`` characters is saved after its first request on a model and loaded
into a slot that lacks it. States are kept per weights file, server build, CPU and slot size
(:func:`states_dir`), under ``$PERSONAGRAPH_PREFIX_DIR`` (default: ``prefix-states/`` in the cache dir),
the least recently used removed beyond ``MAX_BYTES`` in all.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import platform
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from personagraph.models.weights import cache_root

DIR_ENV = "PERSONAGRAPH_PREFIX_DIR"
# Shorter system messages (~50 tokens; an agent's one-line persona prompt) save a second at most, and would
# fill the folder with states that no other persona loads.
MIN_SYSTEM_CHARS = 200
MAX_BYTES = 512 * 2**20  # all models' states together; one is ~30 kB per token for the 1.5B model
SUFFIX = ".state"


def prefix_text(messages: Sequence[Mapping[str, Any]] | None) -> str | None:
    """The messages as one text that grows with the prompt (role and content of each): two requests share a
    prefix of it when their rendered prompts share their first tokens; None when unknown (raw tokens)."""
    if messages is None:
        return None
    return "".join(f"\x1e{m.get('role')}\x1f{m.get('content')}" for m in messages)


def token_text(tokens: Sequence[int] | None) -> str | None:
    """A prompt of token ids as a text that shares a prefix with another's where their tokens do."""
    return None if tokens is None else "".join(f"{token}," for token in tokens)


def enough_shared(messages: Sequence[Mapping[str, Any]] | None, text: str | None) -> int:
    """How many characters of a request's text a slot's cache must share to be worth more to it than any
    other slot: its whole first message; for raw tokens, a tenth (llama-server's own rule when it picks)."""
    if messages:
        return len(prefix_text(messages[:1]) or "")
    return max(1, len(text or "") // 10)


def system_key(messages: Sequence[Mapping[str, Any]] | None) -> str | None:
    """The file key of the prompt's system message when it opens the prompt and is worth saving."""
    if not messages or messages[0].get("role") != "system":
        return None
    content = messages[0].get("content")
    if not isinstance(content, str) or len(content) < MIN_SYSTEM_CHARS:
        return None
    return hashlib.sha256(content.encode()).hexdigest()[:32]


def states_root() -> Path:
    """Where every model's states are kept: ``$PERSONAGRAPH_PREFIX_DIR``, else ``prefix-states/`` in the
    cache dir."""
    return Path(os.environ.get(DIR_ENV) or cache_root() / "prefix-states")


def states_dir(weights: Path, server: Path, slot_tokens: int, extra_args: Sequence[str]) -> Path:
    """The folder of one model's states: named by everything a state's KV cache depends on (the weights
    file, the server build, the CPU, the slot size, extra server arguments), so no state is read into
    another."""
    def identity(path: Path | str) -> list[Any]:
        stat = os.stat(path)
        return [os.path.realpath(path), stat.st_size, stat.st_mtime_ns]

    stamp = server.with_name("BUILD_STAMP")
    build = stamp.read_text(errors="replace") if stamp.is_file() else identity(server)
    blob = json.dumps([identity(weights), build, _cpu(), slot_tokens, list(extra_args)])
    return states_root() / f"{Path(weights).stem}-{hashlib.sha256(blob.encode()).hexdigest()[:16]}"


def _cpu() -> str:
    """The CPU's model and feature flags: the server computes on the kernels they select, so a folder shared
    by different machines keeps each one's states apart."""
    try:
        lines = Path("/proc/cpuinfo").read_text(errors="replace").splitlines()
    except OSError:
        return platform.processor() or platform.machine()
    return "\n".join(dict.fromkeys(line for line in lines if line.startswith(("model name", "flags"))))


def prune(root: Path, max_bytes: int = MAX_BYTES) -> None:
    """Removes the least recently used states under ``root`` until they fit in ``max_bytes``; after an hour,
    the partial files of saves that never ended (a process killed mid-save) and the folders left empty (an
    engine that never saved: tests, other slot sizes)."""
    hour_ago = time.time() - 3600
    for stale in [*root.glob("*/*.partial"), *root.glob("*/")]:
        try:
            if stale.stat().st_mtime >= hour_ago:
                continue
            if stale.is_dir():
                stale.rmdir()
            else:
                stale.unlink()
        except OSError:  # a folder that holds states, or one another process removed
            continue
    files = []
    for path in root.glob(f"*/*{SUFFIX}"):
        try:
            stat = path.stat()
        except OSError:
            continue
        files.append((stat.st_mtime, stat.st_size, path))
    total = sum(size for _, size, _ in files)
    for _, size, path in sorted(files, key=lambda f: f[0]):
        if total <= max_bytes:
            break
        path.unlink(missing_ok=True)
        total -= size


@dataclass
class _Slot:
    busy: bool = False
    text: str | None = None  # prefix_text of what its cache begins with; None: unknown
    used: float = 0.0


class SlotPins:
    """One server's slots as this process uses them: which is busy, and which text its cache begins with.

    Every request of the process to the server goes through :meth:`take`, so the server never places one
    itself (it would take a slot between a request's end and the saving of its state). Usable from any
    thread and event loop: a request waiting for a slot is woken by the one that gives it back."""

    def __init__(self, slots: int, folder: Path | None) -> None:
        self.folder = folder
        self._slots = [_Slot() for _ in range(slots)]
        self._lock = threading.Lock()
        self._waiting: deque[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = deque()
        self._saving: set[str] = set()

    async def take(self, text: str | None, enough: int) -> tuple[int, int]:
        """A free slot for a request whose :func:`prefix_text` is ``text``, marked busy, and how many
        characters of ``text`` its cache is known to begin with. The free slot sharing the longest prefix,
        if it shares ``enough`` characters; else the least recently used one (a state loaded there then
        replaces the least valuable cache). Waits while every slot is busy."""
        while True:
            with self._lock:
                if taken := self._take(text, enough):
                    return taken
                wake: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                waiter = (asyncio.get_running_loop(), wake)
                self._waiting.append(waiter)
            try:
                await wake
            except asyncio.CancelledError:
                with self._lock:
                    if waiter in self._waiting:
                        self._waiting.remove(waiter)
                    else:  # woken and cancelled at once: the freed slot goes to the next in line
                        self._wake_next()
                raise

    def _take(self, text: str | None, enough: int) -> tuple[int, int] | None:
        free = [i for i, slot in enumerate(self._slots) if not slot.busy]
        if not free:
            return None
        shared = {i: _common(self._slots[i].text, text) for i in free}
        best = max(free, key=lambda i: (shared[i], -self._slots[i].used))
        if shared[best] < enough:
            best = min(free, key=lambda i: self._slots[i].used)
        self._slots[best].busy = True
        return best, shared[best]

    def give_back(self, slot: int, text: str | None) -> None:
        """``slot`` is free again; its cache now begins with ``text`` (None: unknown)."""
        with self._lock:
            self._slots[slot] = _Slot(False, text, time.monotonic())
            self._wake_next()

    def _wake_next(self) -> None:
        while self._waiting:
            loop, wake = self._waiting.popleft()
            try:
                loop.call_soon_threadsafe(_set, wake)
                return
            except RuntimeError:  # its loop has closed
                continue

    def saved(self, key: str) -> Path | None:
        """``key``'s saved state, if there is one."""
        if self.folder is None:
            return None
        path = self.folder / f"{key}{SUFFIX}"
        return path if path.is_file() else None

    def claim_save(self, key: str) -> Path | None:
        """The folder to save ``key``'s state in when this request should save it: there is a folder, no
        state yet, and no other request of this process is saving it; else None."""
        with self._lock:
            if self.folder is None or key in self._saving or self.saved(key) is not None:
                return None
            self._saving.add(key)
            return self.folder

    def saving_done(self, key: str) -> None:
        with self._lock:
            self._saving.discard(key)


def _set(wake: asyncio.Future[None]) -> None:
    if not wake.done():
        wake.set_result(None)


def _common(a: str | None, b: str | None) -> int:
    return len(os.path.commonprefix([a, b])) if a is not None and b is not None else 0
