"""A stand-in for llama-server in tests: accepts its command line, serves bench/fake_openai's replies.

Like llama-server it binds ``--host``/``--port`` (0: the OS picks), logs ``listening on http://HOST:PORT``
once ready, answers ``GET /health`` and prints its build for ``--version`` (run provenance asks).
``FAKE_ENGINE_DELAY`` (seconds per reply) keeps calls in flight; ``FAKE_ENGINE_LOAD_S`` (seconds) passes
as a model load before it listens; ``FAKE_ENGINE_EXIT`` makes it exit at once with that code (an engine
that cannot start).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from aiohttp import web  # noqa: E402

from bench.fake_openai import FakeOpenAI  # noqa: E402


async def serve(host: str, port: int) -> None:
    await asyncio.sleep(float(os.environ.get("FAKE_ENGINE_LOAD_S", "0")))  # "loading the model"
    server = FakeOpenAI(host=host, port=port, delay=float(os.environ.get("FAKE_ENGINE_DELAY", "0")))
    app = server.app()
    app.router.add_get("/health", lambda request: web.json_response({"status": "ok"}))
    runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    print(f"main: listening on http://{host}:{runner.addresses[0][1]}", flush=True)
    await asyncio.Event().wait()


def fake_server_binary(directory: Path) -> Path:
    """An executable ``llama-server`` in ``directory`` running this fake (for ``engine.SERVER_ENV``)."""
    script = directory / "llama-server"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{Path(__file__).resolve()}" "$@"\n')
    script.chmod(0o755)
    return script


def use_fake_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Points the embedded models' engines at this fake (no weights needed), with a fresh registry;
    the caller stops the engines (``engine.stop_engines()``) before the patches are undone."""
    from personagraph.models import engine

    monkeypatch.setenv(engine.SERVER_ENV, str(fake_server_binary(tmp_path)))
    monkeypatch.setenv("PERSONAGRAPH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(engine, "ensure_weights", lambda model: tmp_path / f"{model.name}.gguf")
    monkeypatch.setattr(engine, "_engines", {})


def main() -> None:
    if code := os.environ.get("FAKE_ENGINE_EXIT"):
        print("fake engine: failing on purpose", flush=True)
        sys.exit(int(code))
    if "--version" in sys.argv[1:]:  # as llama-server: the build on stderr (run provenance reads it)
        print("version: 0 (fake)", file=sys.stderr, flush=True)
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    args, _ = parser.parse_known_args()  # --model, --parallel, --ctx-size, … do not matter here
    asyncio.run(serve(args.host, args.port))


if __name__ == "__main__":
    main()
