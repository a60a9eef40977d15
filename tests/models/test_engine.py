"""The embedded models' engine (a managed llama-server per model), on a fake server binary: lazy start on
an OS-chosen port, one restart after a death, one-line failure after the second, nothing left running."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from fake_llama_server import use_fake_engine

from personagraph.errors import PersonagraphError
from personagraph.models import ModelClient, openai_http
from personagraph.models import engine as engine_module
from personagraph.models.engine import EngineFailed, engine_for
from personagraph.models.openai_http import ChatReply
from personagraph.schemas import JudgeReply

MODEL = "qwen2.5-coder-0.5b"
HOWDY = [{"role": "user", "content": "Howdy, what brings you to town?"}]


@pytest.fixture
def fake_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    use_fake_engine(tmp_path, monkeypatch)
    yield
    engine_module.stop_engines()


def alive(pid: int) -> bool:
    """Whether a process runs (a zombie nobody reaped does not count)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


async def test_first_call_starts_the_engine_on_a_port_the_os_chose(fake_engine: None) -> None:
    client = ModelClient.create(f"local:{MODEL}", "persona")
    engine = engine_for(MODEL)
    assert engine.pid is None  # nothing runs before the first call
    assert client._concurrency == engine.slots > 1  # the server's slots, not one call at a time
    reply = await client.complete(HOWDY)
    assert reply.ok and reply.text
    assert engine.pid is not None and alive(engine.pid)
    url = await engine.base_url()
    assert url.startswith("http://127.0.0.1:") and url.endswith("/v1") and ":8080/" not in url
    assert "listening on" in engine.log_path.read_text() and engine.log_path.parent.name == "logs"
    other = engine_for("qwen2.5-coder-1.5b")
    assert (await other.base_url()) != url and other.pid != engine.pid  # one server per model


async def test_local_calls_post_the_whole_body_to_the_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """response_format (llama.cpp's schema-constrained decoding) and logprob fields reach the server."""
    sent: list[tuple[str, dict[str, Any], float | None]] = []

    async def fake_chat(base_url: str, api_key: str, body: dict[str, Any], *, timeout_s: float | None) -> Any:
        sent.append((base_url, body, timeout_s))
        return ChatReply('{"score": 4, "rationale": "in character"}', 10, 5)

    async def fake_url(self: Any) -> str:
        return "http://127.0.0.1:5555/v1"

    monkeypatch.setattr(openai_http, "chat_completion", fake_chat)
    monkeypatch.setattr(engine_module.Engine, "base_url", fake_url)
    client = ModelClient.create("local:qwen2.5-coder-1.5b", "judge", max_tokens=64)
    reply = await client.structured(HOWDY, JudgeReply)
    assert reply.ok and reply.value is not None and reply.value.score == 4
    await client.complete(HOWDY, top_logprobs=3)
    (url, structured, timeout), (_, plain, _) = sent
    assert url == "http://127.0.0.1:5555/v1" and timeout is None
    assert structured["response_format"]["type"] == "json_object"
    assert structured["response_format"]["schema"]["properties"]["score"]["type"] == "integer"
    assert plain["logprobs"] is True and plain["top_logprobs"] == 3 and plain["max_tokens"] == 64


async def test_a_killed_engine_is_restarted_once_and_the_calls_in_flight_finish(
    fake_engine: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_ENGINE_DELAY", "1.5")
    client = ModelClient.create(f"local:{MODEL}", "persona")
    engine = engine_for(MODEL)
    await engine.base_url()
    first = engine.pid
    assert first is not None
    calls = [asyncio.create_task(client.complete([{"role": "user", "content": f"question {i}"}]))
             for i in range(3)]
    await asyncio.sleep(0.5)
    os.kill(first, signal.SIGKILL)
    replies = await asyncio.gather(*calls)
    assert [r.status for r in replies] == ["ok"] * 3 and all(r.text for r in replies)
    assert engine.deaths == ["SIGKILL"]
    assert engine.pid not in (None, first)


async def test_a_second_death_fails_every_further_call_fast_with_one_line(
    fake_engine: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_ENGINE_DELAY", "1.5")
    client = ModelClient.create(f"local:{MODEL}", "persona")
    engine = engine_for(MODEL)
    for _ in range(2):
        await engine.base_url()
        pid = engine.pid
        assert pid is not None
        call = asyncio.create_task(client.complete(HOWDY))
        await asyncio.sleep(0.5)
        os.kill(pid, signal.SIGSEGV)
        if engine.deaths:  # the second death: the call in flight ends the run
            with pytest.raises(EngineFailed) as failed:
                await call
        else:
            assert (await call).ok
    message = str(failed.value)
    assert message == (f"local:{MODEL}: the llama.cpp engine died twice (SIGSEGV, SIGSEGV); "
                       f"see {engine.log_path}")
    assert "\n" not in message and engine.log_path.is_file()  # the log it points to is kept
    started = time.perf_counter()
    with pytest.raises(EngineFailed, match="died twice"):
        await client.complete([{"role": "user", "content": "another question"}])
    assert time.perf_counter() - started < 0.5 and engine.pid is None  # fails fast, starts nothing


async def test_an_engine_that_cannot_start_fails_with_one_line(
    fake_engine: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_ENGINE_EXIT", "3")
    with pytest.raises(EngineFailed, match=r"died twice \(exit code 3, exit code 3\); see .*\.log$"):
        await ModelClient.create(f"local:{MODEL}", "persona").complete(HOWDY)


async def test_a_missing_server_binary_says_how_to_build_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(engine_module.SERVER_ENV, str(tmp_path / "nowhere" / "llama-server"))
    monkeypatch.setattr(engine_module, "_engines", {})
    with pytest.raises(PersonagraphError, match="bash scripts/build_llama_server.sh"):
        await ModelClient.create(f"local:{MODEL}", "persona").complete(HOWDY)


async def test_a_run_starts_its_embedded_models_before_their_first_call(fake_engine: None) -> None:
    engine_module.start_engines(["openai:gpt-4o-mini", "plugin.module:agent", "test:echo", f"local:{MODEL}"])
    engine = engine_for(MODEL)
    deadline = time.monotonic() + 30
    while engine.pid is None and time.monotonic() < deadline:  # loading in the background, no call made
        await asyncio.sleep(0.05)
    assert engine.pid is not None and alive(engine.pid)
    assert set(engine_module._engines) == {MODEL}  # other providers and plug-in paths start nothing
    pid = engine.pid
    reply = await ModelClient.create(f"local:{MODEL}", "persona").complete(HOWDY)
    assert reply.ok and engine.pid == pid  # the first call used the server started early
    engine_module.start_engines([f"local:{MODEL}"])  # running already: nothing new
    assert engine.pid == pid


async def test_a_call_made_while_the_model_loads_waits_for_it(
    fake_engine: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_ENGINE_LOAD_S", "1.0")
    engine = engine_for(MODEL)
    engine.start_soon()
    deadline = time.monotonic() + 30
    while engine.pid is None and time.monotonic() < deadline:  # the process runs, its model still loads
        await asyncio.sleep(0.01)
    url = await engine.base_url()
    assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")  # not "": the address once ready
    assert (await ModelClient.create(f"local:{MODEL}", "persona").complete(HOWDY)).ok


async def test_two_models_load_at_once(fake_engine: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """A call to one model never queues behind another model's loading: each engine spawns its own."""
    monkeypatch.setenv("FAKE_ENGINE_LOAD_S", "3.0")
    engine_module.start_engines([f"local:{MODEL}", "local:qwen2.5-coder-1.5b"])
    first, second = engine_for(MODEL), engine_for("qwen2.5-coder-1.5b")
    deadline = time.monotonic() + 30
    while (first.pid is None or second.pid is None) and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert first.pid is not None and second.pid is not None
    assert not first._url and not second._url  # both processes up, neither model loaded yet: side by side
    assert (await second.base_url()) and (await first.base_url())


async def test_a_background_start_that_fails_is_said_by_the_first_call(
    fake_engine: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_ENGINE_EXIT", "3")
    engine_module.start_engines([f"local:{MODEL}"])
    with pytest.raises(EngineFailed, match=r"died twice \(exit code 3, exit code 3\); see .*\.log$"):
        await ModelClient.create(f"local:{MODEL}", "persona").complete(HOWDY)


async def test_stop_ends_the_server_and_removes_its_log(fake_engine: None) -> None:
    engine = engine_for(MODEL)
    await engine.base_url()
    pid = engine.pid
    assert pid is not None
    engine.stop()
    engine.stop()  # idempotent
    assert not alive(pid) and engine.pid is None and not engine.log_path.exists()
    await engine.base_url()  # the next call starts a new one
    assert engine.pid not in (None, pid) and engine.deaths == []


_MULTIPLYING = """
import asyncio, re, threading, time
from pathlib import Path
import numpy as np
from threadpoolctl import threadpool_limits
from personagraph.models import engine
engine.ensure_weights = lambda model: "unused.gguf"
left, right = np.ones((512, 384), dtype=np.float32), np.ones((384, 1536), dtype=np.float32)
products = [0]

def multiply():
    with threadpool_limits(limits=2):  # OpenBLAS's thread pool, which a fork shuts down
        while True:
            left @ right
            products[0] += 1

threading.Thread(target=multiply, daemon=True).start()
for _ in range(8):
    server = engine.engine_for("qwen2.5-coder-0.5b")
    asyncio.run(server.base_url())
    limits = Path(f"/proc/{server.pid}/limits").read_text()
    assert re.search(r"Max core file size\\s+0\\s+0", limits), limits
    server.stop()
    seen = products[0]
    while products[0] == seen:
        time.sleep(0.01)
print("ok", products[0], flush=True)
"""


def test_servers_start_while_another_thread_multiplies_matrices(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Starting a server does not fork() this process: fork() runs OpenBLAS's atfork handler, which shuts
    its thread pool down under a product another thread is running (the embedding model encoding the
    environment pool while the engines start), and the process then hangs. The server still dumps no
    core (and dies with this process: the test below). Run in a child, so that a hang fails this test."""
    use_fake_engine(tmp_path, monkeypatch)
    try:
        done = subprocess.run([sys.executable, "-c", _MULTIPLYING], capture_output=True, text=True,
                              env=os.environ.copy(), timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail("a process starting servers while multiplying matrices hung")
    assert done.returncode == 0 and done.stdout.startswith("ok"), done.stderr[-2000:]


_PARENT = """
import asyncio, sys, time
from personagraph.models import engine
engine.ensure_weights = lambda model: "unused.gguf"
server = engine.engine_for("qwen2.5-coder-0.5b")
asyncio.run(server.base_url())
print(server.pid, flush=True)
sys.stdin.readline()  # the test has seen the server alive: now exit normally (or wait to be killed)
if sys.argv[1] == "wait":
    time.sleep(120)
"""


@pytest.mark.parametrize("end", ["exit", "SIGKILL"])
def test_nothing_is_left_running_when_the_parent_exits_or_is_killed(
    end: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_fake_engine(tmp_path, monkeypatch)
    parent = subprocess.Popen([sys.executable, "-c", _PARENT, "wait" if end == "SIGKILL" else "exit"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=os.environ.copy())
    assert parent.stdout is not None and parent.stdin is not None
    pid = int(parent.stdout.readline())
    assert alive(pid)  # the parent holds on until told (it exited at once before: a race with this check)
    parent.stdin.write("go\n")
    parent.stdin.close()
    if end == "SIGKILL":
        parent.kill()  # no atexit: the kernel's parent-death signal ends the server
    parent.wait(60)
    deadline = time.monotonic() + 30  # generous: a loaded machine delays the exit handlers
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid)


async def test_a_request_longer_than_a_slot_fails_saying_what_to_set(monkeypatch: pytest.MonkeyPatch) -> None:
    refusal = ("HTTP 400: request (5012 tokens) exceeds the available context size (4096 tokens), "
               "try increasing it")

    async def refusing_chat(base_url: str, api_key: str, body: dict[str, Any], **_: Any) -> Any:
        raise openai_http.PermanentModelError(refusal)

    async def fake_url(self: Any) -> str:
        return "http://127.0.0.1:5555/v1"

    monkeypatch.setattr(openai_http, "chat_completion", refusing_chat)
    monkeypatch.setattr(engine_module.Engine, "base_url", fake_url)
    reply = await ModelClient.create(f"local:{MODEL}", "persona").complete(HOWDY)
    assert not reply.ok and reply.error is not None
    assert refusal in reply.error and f"${engine_module.CTX_ENV}" in reply.error  # what to set, and the cost
    assert f"holds {engine_module.CTX_PER_SLOT} tokens" in reply.error and "\n" not in reply.error
    assert engine_module.explain_refusal("HTTP 401: bad key") == "HTTP 401: bad key"  # other errors unchanged
