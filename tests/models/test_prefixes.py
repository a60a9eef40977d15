"""personagraph.models.prefixes: which system messages are saved, which slot a request goes to, how long a
request waits for one, and which saved states are kept."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path

import pytest

from personagraph.models import prefixes
from personagraph.models.prefixes import (
    SlotPins,
    enough_shared,
    prefix_text,
    prune,
    states_dir,
    system_key,
    token_text,
)

RULES = "You write evaluation questions for a persona test. " * 6  # persona-independent, > 200 characters


def ask(persona: str, system: str = RULES) -> list[dict[str, str]]:
    return [{"role": "system", "content": system}, {"role": "user", "content": f"Persona: {persona}"}]


def test_a_long_system_message_is_the_key_whatever_follows_it() -> None:
    key, chars = system_key(ask("a cowboy")), enough_shared(ask("a cowboy"), None)
    assert key is not None and system_key(ask("a nurse")) == key
    assert prefix_text(ask("a cowboy"))[:chars] == prefix_text(ask("a nurse"))[:chars]  # shared up to there
    assert prefix_text(ask("a cowboy"))[chars:] != prefix_text(ask("a nurse"))[chars:]
    assert system_key(ask("a cowboy", RULES + "Task: Toxicity Control")) != key
    assert system_key(ask("a cowboy", "You are a cowboy.")) is None  # too short to be worth a file
    assert system_key([{"role": "user", "content": RULES}]) is None and system_key(None) is None


async def test_a_request_goes_to_the_free_slot_holding_its_first_message_with_most_after_it() -> None:
    pins = SlotPins(4, None)
    cowboy, nurse, poet = (prefix_text(ask(p)) for p in ("a cowboy", "a nurse", "a poet"))
    for _ in range(4):
        await pins.take(None, enough=1)
    other_rules = prefix_text(ask("a nurse", "Other rules. " * 20))
    for slot, text in [(2, None), (1, cowboy), (3, poet), (0, other_rules)]:
        pins.give_back(slot, text)  # in this order: slot 2 is the least recently used
    first = enough_shared(ask("a nurse"), None)
    assert (await pins.take(nurse, enough=first)) == (1, len(os.path.commonprefix([cowboy, nurse])))
    assert (await pins.take(nurse, enough=first)) == (3, len(os.path.commonprefix([poet, nurse])))
    # no free slot holds the first message: the least recently used one, not the one sharing "system"
    assert (await pins.take(nurse, enough=first))[0] == 2


async def test_a_prompt_of_tokens_goes_where_a_tenth_of_it_is_cached_else_to_the_least_used() -> None:
    pins = SlotPins(3, None)
    for _ in range(3):
        await pins.take(None, enough=1)
    context = list(range(100, 140))
    pins.give_back(2, token_text(context + [7, 8]))  # the same dialogue, another reply scored after it
    pins.give_back(1, token_text([100, 1, 2, 3]))  # shares one token: not enough
    pins.give_back(0, prefix_text(ask("a nurse")))
    text = token_text(context + [9, 9, 9])
    assert (await pins.take(text, enough_shared(None, text))) == (2, len(token_text(context) or ""))
    assert (await pins.take(text, enough_shared(None, text)))[0] == 1  # the least recently used of 0 and 1


async def test_a_request_waits_for_a_free_slot_given_back_from_another_thread() -> None:
    pins = SlotPins(1, None)
    assert (await pins.take(None, enough=1))[0] == 0
    waiting = asyncio.create_task(pins.take(None, enough=1))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    threading.Thread(target=pins.give_back, args=(0, None)).start()
    assert (await asyncio.wait_for(waiting, 5))[0] == 0


async def test_a_waiter_cancelled_after_its_wake_passes_the_slot_on() -> None:
    pins = SlotPins(1, None)
    await pins.take(None, enough=1)
    first, second = (asyncio.create_task(pins.take(None, enough=1)) for _ in range(2))
    await asyncio.sleep(0.05)
    pins.give_back(0, None)  # wakes the first waiter ...
    first.cancel()  # ... which is cancelled before it runs
    assert (await asyncio.wait_for(second, 5))[0] == 0
    with pytest.raises(asyncio.CancelledError):
        await first


def test_a_state_is_kept_per_weights_file_build_and_slot_size(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(prefixes.DIR_ENV, str(tmp_path / "states"))
    weights, server = tmp_path / "model.gguf", tmp_path / "llama-server"
    weights.write_bytes(b"weights")
    server.write_bytes(b"server")
    (tmp_path / "BUILD_STAMP").write_text("build 1")
    first = states_dir(weights, server, 4096, ())
    assert first.parent == tmp_path / "states" and first.name.startswith("model-")
    assert states_dir(weights, server, 4096, ()) == first
    assert states_dir(weights, server, 2048, ()) != first
    assert states_dir(weights, server, 4096, ("--cache-type-k", "q8_0")) != first
    (tmp_path / "BUILD_STAMP").write_text("build 2")
    assert states_dir(weights, server, 4096, ()) != first
    weights.write_bytes(b"other weights")
    assert states_dir(weights, server, 4096, ()) not in (first, states_dir(weights, server, 2048, ()))


def test_the_least_recently_used_states_go_beyond_the_budget(tmp_path: Path) -> None:
    for age, name in enumerate(["old", "mid", "new"]):
        path = tmp_path / ("a" if name != "mid" else "b") / f"{name}{prefixes.SUFFIX}"
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(b"x" * 100)
        os.utime(path, (1000 + age, 1000 + age))
    (tmp_path / "a" / "unrelated.txt").write_bytes(b"x" * 1000)  # not a state: neither counted nor removed
    (tmp_path / "a" / "killed.123.partial").write_bytes(b"x")
    os.utime(tmp_path / "a" / "killed.123.partial", (1000, 1000))  # a save that never ended
    (tmp_path / "b" / "saving.456.partial").write_bytes(b"x")  # a save under way
    for name, age in [("unused", 1000), ("just-started", time.time())]:
        (tmp_path / name).mkdir()
        os.utime(tmp_path / name, (age, age))  # an engine that never saved; one that may yet
    prune(tmp_path, max_bytes=250)
    left = sorted(p.name for p in tmp_path.rglob("*"))
    assert left == ["a", "b", "just-started", "mid.state", "new.state", "saving.456.partial", "unrelated.txt"]
    prune(tmp_path, max_bytes=100)
    assert not (tmp_path / "b" / "mid.state").exists() and (tmp_path / "a" / "new.state").exists()
