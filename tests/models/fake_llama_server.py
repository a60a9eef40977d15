"""A stand-in for llama-server in tests: accepts its command line, serves bench/fake_openai's replies.

Like llama-server it binds ``--host``/``--port`` (0: the OS picks), logs ``listening on http://HOST:PORT``
once ready, answers ``GET /health``, saves and restores slots (:class:`Slots`) and prints its build for
``--version`` (run provenance asks). ``FAKE_ENGINE_DELAY`` (seconds per reply) keeps calls in flight;
``FAKE_ENGINE_LOAD_S`` (seconds) passes as a model load before it listens; ``FAKE_ENGINE_EXIT`` makes it
exit at once with that code (an engine that cannot start); ``FAKE_ENGINE_SAVE_FAILS`` fails each slot save
after writing its file.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from aiohttp import web  # noqa: E402

from bench.fake_openai import FakeOpenAI  # noqa: E402


class Slots:
    """llama-server's slot endpoints as far as the engine uses them: a chat request's ``id_slot`` sets what
    that slot holds, ``POST /slots/N?action=save|restore`` writes it to or reads it from a file in the
    ``--slot-save-path`` folder. Each event is a JSON line in ``$FAKE_ENGINE_EVENTS``, if set."""

    def __init__(self, folder: str | None) -> None:
        self.folder = Path(folder) if folder else None
        self.held: dict[int, list] = {}

    def log(self, **event: object) -> None:
        if path := os.environ.get("FAKE_ENGINE_EVENTS"):
            with open(path, "a", encoding="utf-8") as out:
                out.write(json.dumps(event) + "\n")

    @web.middleware
    async def record(self, request: web.Request, handler: object) -> web.StreamResponse:
        if request.path == "/v1/chat/completions":
            body = await request.json()
            self.log(event="chat", slot=body.get("id_slot"), messages=body.get("messages"))
            if body.get("id_slot") is not None:
                self.held[body["id_slot"]] = body.get("messages")
        return await handler(request)  # type: ignore[operator]

    async def action(self, request: web.Request) -> web.StreamResponse:
        slot, action = int(request.match_info["slot"]), request.query.get("action")
        filename = (await request.json())["filename"]
        if self.folder is None:
            return web.json_response({"error": {"message": "slot save path not set"}}, status=501)
        self.log(event=action, slot=slot, filename=filename)
        if action == "save":
            (self.folder / filename).write_text(json.dumps(self.held.get(slot)), encoding="utf-8")
            if os.environ.get("FAKE_ENGINE_SAVE_FAILS"):  # a disk that filled up mid-write
                return web.json_response({"error": {"message": "failed to save slot"}}, status=500)
        elif action == "restore":
            try:
                self.held[slot] = json.loads((self.folder / filename).read_text(encoding="utf-8"))
            except OSError:
                return web.json_response({"error": {"message": "failed to restore slot"}}, status=400)
        return web.json_response({"id_slot": slot, "filename": filename})


async def serve(host: str, port: int, slot_save_path: str | None) -> None:
    await asyncio.sleep(float(os.environ.get("FAKE_ENGINE_LOAD_S", "0")))  # "loading the model"
    server = FakeOpenAI(host=host, port=port, delay=float(os.environ.get("FAKE_ENGINE_DELAY", "0")))
    slots = Slots(slot_save_path)
    app = server.app()
    app.middlewares.append(slots.record)
    app.router.add_get("/health", lambda request: web.json_response({"status": "ok"}))
    app.router.add_post("/slots/{slot}", slots.action)
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
    parser.add_argument("--slot-save-path")
    args, _ = parser.parse_known_args()  # --model, --parallel, --ctx-size, … do not matter here
    asyncio.run(serve(args.host, args.port, args.slot_save_path))


if __name__ == "__main__":
    main()
