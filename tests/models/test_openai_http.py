"""The lean OpenAI-compatible transport: request body and log-probabilities, against a local server."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aiohttp import web

from personagraph.models import ModelClient, openai_http
from personagraph.models.openai_http import TokenLogprobs, parse_logprobs

LOGPROBS = {"content": [
    {"token": "4", "logprob": -0.2,
     "top_logprobs": [{"token": "4", "logprob": -0.2}, {"token": "5", "logprob": -1.9}]},
]}


@pytest.fixture
async def server() -> Any:
    seen: list[dict[str, Any]] = []

    async def handle(request: web.Request) -> web.Response:
        body = await request.json()
        seen.append(body)
        choice: dict[str, Any] = {"message": {"role": "assistant", "content": "4"}}
        if body.get("logprobs"):
            choice["logprobs"] = LOGPROBS
        return web.json_response({"choices": [choice], "usage": {"prompt_tokens": 7, "completion_tokens": 1}})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield f"http://127.0.0.1:{port}/v1", seen
    await openai_http.close_sessions()
    await runner.cleanup()


async def test_logprobs_are_asked_for_and_parsed(server) -> None:
    url, seen = server
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}], "logprobs": True, "top_logprobs": 2}
    reply = await openai_http.chat_completion(url, "", body, timeout_s=10)
    assert seen[-1]["top_logprobs"] == 2 and seen[-1]["logprobs"] is True
    assert reply.logprobs == [TokenLogprobs("4", -0.2, (("4", -0.2), ("5", -1.9)))]
    plain_body = {"model": "m", "messages": body["messages"]}
    plain = await openai_http.chat_completion(url, "", plain_body, timeout_s=10)
    assert plain.text == "4" and plain.logprobs is None and plain.input_tokens == 7


@pytest.mark.parametrize("data", [None, {}, {"content": None}, {"content": []}, {"content": [{"token": "a"}]},
                                  {"content": [{"token": "a", "logprob": "x"}]}, "text", {"content": "x"}])
def test_malformed_logprobs_are_none(data: Any) -> None:
    assert parse_logprobs(json.loads(json.dumps(data))) is None


async def test_openai_specs_get_logprobs_through_the_client(server) -> None:
    url, seen = server
    client = ModelClient.create("openai:m", "judge", base_url=url)
    reply = await client.complete([{"role": "user", "content": "x"}], top_logprobs=2)
    assert reply.logprobs is not None and reply.logprobs[0].top[1] == ("5", -1.9)
    assert seen[-1]["top_logprobs"] == 2
