"""A lean HTTP transport for OpenAI-compatible chat completions: the hot path of ``openai:`` specs.

Why not LangChain's ``ChatOpenAI.ainvoke`` (still built by the factory, for anyone who wants it)? On a
batch of a few thousand calls it cost ~14 ms of CPU per call in this process: the openai SDK walks every
request body recursively to "transform" it (~10 ms with a JSON schema in ``response_format``), httpx's
connection pool rescans every pooled connection on each request (quadratic at 100+ connections), and
LangChain converts messages and dispatches callbacks through a thread pool. This module posts the same
JSON body with one pooled aiohttp session per event loop and endpoint, and reports errors as the
exceptions :func:`personagraph.models.retry.classify` understands.

The API key only travels in the ``Authorization`` header; it is never part of a message, error or log.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from personagraph.models.retry import TransientModelError

try:  # orjson (a dependency of langsmith, hence of langchain-core) encodes ~5× faster than json
    import orjson

    def _encode(body: dict[str, Any]) -> bytes:
        try:
            return orjson.dumps(body)
        except TypeError:
            return json.dumps(body, ensure_ascii=False).encode()

    _decode = orjson.loads
except ImportError:  # pragma: no cover
    def _encode(body: dict[str, Any]) -> bytes:
        return json.dumps(body, ensure_ascii=False).encode()

    _decode = json.loads


class PermanentModelError(Exception):
    """A failure that will not pass by retrying (bad request, auth, unknown model)."""


@dataclass(frozen=True)
class TokenLogprobs:
    """One generated token with its log-probability and the top alternatives at that position."""

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...]  # (token, logprob), most likely first; ``token`` too when in the top k


def parse_logprobs(data: Any) -> list[TokenLogprobs] | None:
    """Reads OpenAI's ``choices[0].logprobs`` (``{"content": [{token, logprob, top_logprobs}, …]}``).

    vLLM and llama.cpp's server answer in the same format. Anything else (absent, null, malformed —
    the reply is untrusted) is None: logprobs are optional, never a reason to fail a call. A log-probability
    that is not a finite number ≤ 0 (a probability above 1, NaN, a bool) makes the whole set malformed.
    """
    content = data.get("content") if isinstance(data, dict) else None
    if not isinstance(content, list) or not content:
        return None
    tokens = []
    try:
        for entry in content:
            top = tuple((str(alt["token"]), log_probability(alt["logprob"]))
                        for alt in entry.get("top_logprobs") or ())
            tokens.append(TokenLogprobs(str(entry["token"]), log_probability(entry["logprob"]), top))
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    return tokens


def log_probability(value: Any) -> float:
    """A log-probability as a float, or ValueError when it cannot be one (not a finite number ≤ 0)."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError("not a number")
    number = float(value)
    if not math.isfinite(number) or number > 0:
        raise ValueError(f"not a log-probability: {number}")
    return number


@dataclass(frozen=True)
class ChatReply:
    text: str
    input_tokens: int
    output_tokens: int
    logprobs: list[TokenLogprobs] | None = None
    finish_reason: str | None = None  # "stop", "length" (cut off by max_tokens), … as the provider says


_sessions: dict[tuple[int, str, str], Any] = {}
_closers: dict[tuple[int, str, str], AsyncIterator[None]] = {}


async def _closer(key: tuple[int, str, str], session: Any) -> AsyncIterator[None]:
    """An async generator parked at its yield: ``loop.shutdown_asyncgens()`` (run by ``asyncio.run``
    and pytest-asyncio when a loop ends) closes it, which closes the session of that loop."""
    try:
        yield
    finally:
        _sessions.pop(key, None)
        _closers.pop(key, None)
        await session.close()


async def _session(base_url: str, api_key: str) -> Any:
    import aiohttp  # only for openai: specs

    key = (id(asyncio.get_running_loop()), base_url, api_key)
    session = _sessions.get(key)
    if session is None or session.closed:
        connector = aiohttp.TCPConnector(limit=0, limit_per_host=0, ttl_dns_cache=300)
        headers = {"Content-Type": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        session = aiohttp.ClientSession(connector=connector, headers=headers, raise_for_status=False)
        _sessions[key] = session
        closer = _closer(key, session)
        _closers[key] = closer
        await closer.__anext__()
    return session


async def close_sessions() -> None:
    """Closes this event loop's sessions (``evaluate`` calls it at the end; idempotent)."""
    loop_id = id(asyncio.get_running_loop())
    for key in [k for k in _closers if k[0] == loop_id]:
        closer = _closers.get(key)
        if closer is not None:
            await closer.aclose()


def _retry_after(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _message(payload: bytes) -> str:
    """The error message of an error reply (untrusted text: shortened, never formatted or executed)."""
    text = payload.decode("utf-8", "replace")
    try:
        error = json.loads(text).get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])[:300]
    except (ValueError, AttributeError):
        pass
    return text[:300]


async def _post(url: str, session: Any, body: dict[str, Any],
                timeout_s: float | None) -> tuple[int, bytes]:
    """POSTs ``body`` as JSON and returns the reply's status and bytes.

    Raises:
        TransientModelError: 429 (with Retry-After), 408, 5xx, timeouts, dropped connections.
        PermanentModelError: other HTTP errors (400, 401, 404, …).
    """
    import aiohttp  # only for openai: specs and the engine

    timeout = aiohttp.ClientTimeout(total=timeout_s)
    try:
        async with session.post(url, data=_encode(body), timeout=timeout) as resp:
            payload = await resp.read()
            status = resp.status
            retry_after = _retry_after(resp.headers.get("Retry-After"))
    except (asyncio.TimeoutError, TimeoutError) as exc:
        raise TransientModelError(f"timed out after {timeout_s}s") from exc
    except aiohttp.ClientError as exc:
        raise TransientModelError(f"{type(exc).__name__}: {exc}"[:300]) from exc
    if status == 429:
        raise TransientModelError(f"rate limited (HTTP 429): {_message(payload)}", retry_after=retry_after)
    if status >= 500 or status == 408:
        raise TransientModelError(f"server error (HTTP {status}): {_message(payload)}", retry_after=retry_after)
    if status >= 400:
        raise PermanentModelError(f"HTTP {status}: {_message(payload)}")
    return status, payload


async def post_json(url: str, body: dict[str, Any], *, timeout_s: float | None) -> Any:
    """POSTs ``body`` to ``url`` (no key: the embedded engine's own endpoints) and decodes the JSON reply.

    Raises:
        TransientModelError: as :func:`chat_completion`, and a reply that is not JSON.
        PermanentModelError: other HTTP errors.
    """
    root = url.split("/", 3)
    session = await _session("/".join(root[:3]), "")
    _, payload = await _post(url, session, body, timeout_s)
    try:
        return _decode(payload)
    except ValueError as exc:
        raise TransientModelError(f"the reply of {root[-1]} is not JSON") from exc


async def chat_completion(
    base_url: str, api_key: str, body: dict[str, Any], *, timeout_s: float | None
) -> ChatReply:
    """POSTs ``body`` to ``{base_url}/chat/completions``; the reply carries the logprobs the body asked for.

    Raises:
        TransientModelError: 429 (with Retry-After), 408, 5xx, timeouts, dropped connections, a
            body that is not a completion, a completion without text (``null`` or empty content).
        PermanentModelError: other HTTP errors (400, 401, 404, …).
    """
    session = await _session(base_url, api_key)
    status, payload = await _post(base_url.rstrip("/") + "/chat/completions", session, body, timeout_s)
    try:
        data = _decode(payload)
        choice = data["choices"][0]
        message = choice["message"]
        content = message.get("content")
        usage = data.get("usage") or {}
        tokens = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
        raise TransientModelError(f"HTTP {status}: the reply is not a chat completion") from exc
    if content is not None and not isinstance(content, str):
        content = json.dumps(content, ensure_ascii=False)
    if not content or not content.strip():  # a completion with nothing in it is a fault of that reply, not
        # the model's answer: retried like a dropped connection (a second try is usually fine)
        raise TransientModelError(f"HTTP {status}: the reply has no text (content {json.dumps(content)})")
    finish = choice.get("finish_reason")
    return ChatReply(content, *tokens, parse_logprobs(choice.get("logprobs")),
                     finish if isinstance(finish, str) else None)
