"""The engine's saved prompt prefixes: a long system message's slot state saved once, loaded into the slot a
later server sends the same instructions to, and never a reason for a call to fail."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fake_llama_server import use_fake_engine

from personagraph.models import ModelClient, prefixes
from personagraph.models import engine as engine_module
from personagraph.models.engine import engine_for
from personagraph.models.openai_http import post_json
from personagraph.models.prefixes import system_key

MODEL = "qwen2.5-coder-0.5b"
RULES = "You write evaluation questions for a persona test. Each names its setting. " * 4


def ask(persona: str, system: str = RULES) -> list[dict[str, str]]:
    return [{"role": "system", "content": system}, {"role": "user", "content": f"Persona: {persona}"}]


@pytest.fixture
def events(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A fake engine on real (tiny) weights, its slot events logged; yields the events read so far."""
    use_fake_engine(tmp_path, monkeypatch)
    weights = tmp_path / "model.gguf"
    weights.write_bytes(b"weights")
    monkeypatch.setattr(engine_module, "ensure_weights", lambda model: weights)
    monkeypatch.setenv(prefixes.DIR_ENV, str(tmp_path / "states"))
    log = tmp_path / "events.jsonl"
    monkeypatch.setenv("FAKE_ENGINE_EVENTS", str(log))

    def read() -> list[dict[str, Any]]:
        lines = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
        log.unlink(missing_ok=True)
        return [json.loads(line) for line in lines]

    yield read
    engine_module.stop_engines()


def states(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in (tmp_path / "states").glob("*/*"))


async def test_a_system_message_is_saved_once_and_loaded_where_a_later_server_sends_it(
    events: Any, tmp_path: Path
) -> None:
    client = ModelClient.create(f"local:{MODEL}", "question_gen")
    assert (await client.complete(ask("a cowboy"))).ok
    assert (await client.complete(ask("a nurse"))).ok  # to the slot already holding the instructions
    cowboy, save, nurse = events()
    assert [cowboy["event"], save["event"], nurse["event"]] == ["chat", "save", "chat"]
    assert save["slot"] == cowboy["slot"] == nurse["slot"]  # saved before the slot took another request
    key = system_key(ask("a cowboy"))
    assert states(tmp_path) == [f"{key}{prefixes.SUFFIX}"]  # renamed from a partial file once whole
    saved = json.loads(next((tmp_path / "states").glob("*/*")).read_text(encoding="utf-8"))
    assert saved == ask("a cowboy")  # the fake server's slot content: the request just answered

    engine_for(MODEL).stop()  # a later run: a new server, its slots empty
    assert (await client.complete(ask("a poet"))).ok
    restore, poet = events()
    assert restore == {"event": "restore", "slot": poet["slot"], "filename": f"{key}{prefixes.SUFFIX}"}
    assert poet["event"] == "chat" and poet["messages"] == ask("a poet")


async def test_short_instructions_and_raw_prompts_are_not_saved(events: Any, tmp_path: Path) -> None:
    client = ModelClient.create(f"local:{MODEL}", "persona")
    assert (await client.complete(ask("a cowboy", "You are a cowboy."))).ok
    assert (await client.complete([{"role": "user", "content": RULES}])).ok
    assert [e["event"] for e in events()] == ["chat", "chat"] and states(tmp_path) == []


async def test_a_failed_save_leaves_no_state_and_fails_no_call(
    events: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_ENGINE_SAVE_FAILS", "1")  # the server writes part of the file, then fails
    reply = await ModelClient.create(f"local:{MODEL}", "question_gen").complete(ask("a cowboy"))
    assert reply.ok and [e["event"] for e in events()] == ["chat", "save"] and states(tmp_path) == []


async def test_without_a_folder_for_states_nothing_is_saved_and_calls_go_on(
    events: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "taken").write_text("a file, not a folder")
    monkeypatch.setenv(prefixes.DIR_ENV, str(tmp_path / "taken"))
    reply = await ModelClient.create(f"local:{MODEL}", "question_gen").complete(ask("a cowboy"))
    assert reply.ok and [e["event"] for e in events()] == ["chat"]


@pytest.mark.embedded
async def test_a_loaded_prefix_spares_the_reading_and_predicts_as_a_whole_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the real server: a later server reads only the tokens after the saved instructions, and its next
    token's probabilities are those of a server that read the prompt whole, up to the last bits (a prompt
    read in two batches is summed in another order, as with llama.cpp's own prompt cache)."""
    monkeypatch.setenv(prefixes.DIR_ENV, str(tmp_path / "states"))
    monkeypatch.setattr(engine_module, "_engines", {})
    engine = engine_for(MODEL)

    async def next_token(messages: list[dict[str, str]]) -> tuple[dict[str, float], int, int]:
        async with engine.pinned(messages) as (url, slot):
            body = {"messages": messages, "max_tokens": 1, "temperature": 0.0, "logprobs": True,
                    "top_logprobs": 5, **slot}
            reply = await post_json(url + "/chat/completions", body, timeout_s=300)
        top = reply["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
        timings = reply["timings"]
        return {t["token"]: t["logprob"] for t in top}, timings["cache_n"], timings["prompt_n"]

    try:
        _, cached, _ = await next_token(ask("a cowboy"))
        assert cached == 0 and len(states(tmp_path)) == 1
        engine.stop()
        loaded, cached, read = await next_token(ask("a retired nurse"))
        assert cached > 40 and read < 20  # the instructions (~60 tokens) loaded, the persona line read
        engine.stop()
        for state in (tmp_path / "states").glob("*/*"):
            state.unlink()
        whole, cached, _ = await next_token(ask("a retired nurse"))
        assert cached == 0 and max(whole, key=whole.get) == max(loaded, key=loaded.get)
        assert all(abs(whole[t] - loaded[t]) < 0.2 for t in set(whole) & set(loaded))
    finally:
        engine_module.stop_engines()
