"""A deterministic, OpenAI-compatible chat server on loopback: test and benchmark equipment.

Replies depend only on the request's ``model``, ``messages`` and ``response_format``. Structured
calls (``response_format`` of type ``json_schema``, or ``json_object`` with a ``schema`` key) get a
JSON object that validates against the schema; other calls get a short paragraph echoing the last
user message. Faults are injected at configurable rates: 429, 500, timeout, dropped connection, and
200 replies that are faulty — ``malformed`` (structured JSON cut off mid-object), ``null`` (content
``null``), ``empty`` (content ``""``), ``length`` (cut in half with ``finish_reason: "length"``, as a model
stopped by ``max_tokens``), ``huge`` (``huge_chars`` characters, ignoring ``max_tokens``) — at
configurable rates, drawn from ``(seed, body hash, attempt number of that body)`` so a retried
request can succeed and a rerun sees the same fault sequence. With ``echo_auth``, error bodies echo the
request's ``Authorization`` header in clear and base64-encoded (as some broken proxies do). An *outage* fails every chat request with
``outage_status`` (503 by default, retried by clients; 401 is not) for ``outage`` seconds from the first
chat request, or from a call to ``start_outage(seconds)``.

Three ways to run it::

    python bench/fake_openai.py --port 0 --delay 0.05 --rate-429 0.1
    # first stdout line: "listening on http://127.0.0.1:PORT/v1"

    async with FakeOpenAI(delay=0.05, rate_429=0.1) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="x")

    handle = start_in_thread(rate_500=0.2)  # own event loop, for sync code and pytest fixtures
    ...; handle.stop()

Endpoints: ``POST /v1/chat/completions``, ``GET /v1/models``, ``GET /stats``, ``POST /stats/reset``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import json
import math
import random
import re
import signal
import threading
import time
from typing import Any, Literal, Self

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, model_validator

FaultKind = Literal["429", "500", "timeout", "drop", "malformed", "null", "empty", "length", "huge"]
FAULT_KINDS: tuple[FaultKind, ...] = ("429", "500", "timeout", "drop", "malformed", "null", "empty", "length",
                                      "huge")
"""In the order their rates partition [0, 1) (new kinds go last, so that the draws of older configs stay)."""

_CREATED = 1_700_000_000  # fixed timestamp: the whole response body is deterministic
_MAX_DEPTH = 6  # beyond this, recursive schemas get only their required parts
_DEFAULT_ENVIRONMENTS = 3
_POOL_LINE = re.compile(r"^\s*-\s+\**(?P<name>[^:()\n*]+?)\**\s*(?::|\()", re.MULTILINE)
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]{3,}")
# fmt: off
_STOPWORDS = frozenset({
    "about", "above", "after", "again", "also", "been", "before", "being", "could", "does", "doing",
    "from", "have", "having", "here", "into", "just", "like", "more", "most", "much", "only", "other",
    "over", "please", "same", "should", "some", "such", "tell", "than", "that", "their", "them",
    "then", "there", "these", "they", "this", "those", "through", "very", "were", "what", "when",
    "where", "which", "while", "will", "with", "would", "your",
})
_VOCABULARY = (
    "calm", "curious", "practical", "honest", "patient", "thoughtful", "careful", "warm", "direct",
    "modest", "steady", "community", "garden", "library", "morning", "story", "question", "answer",
    "choice", "friend", "neighbour", "plan", "weekend", "market", "river", "music", "lesson",
    "journey", "kitchen", "harbour", "evening", "balance",
)
# fmt: on
_SENTENCES = (
    "As for {a}, I would approach it calmly and think it through.",
    "Honestly, {a} and {b} matter a great deal to me.",
    "I have often thought about {b} in my own life.",
    "When it comes to {c}, I try to stay true to who I am.",
    "That question about {a} reminds me of something I learned long ago.",
    "I would rather be practical about {c} than pretend otherwise.",
)


class FakeOptions(BaseModel):
    """Server configuration. Fault rates partition [0, 1), so their sum must not exceed 1."""

    model_config = ConfigDict(extra="forbid")

    host: str = "127.0.0.1"
    port: int = Field(0, ge=0, le=65535, description="0 picks a free port")
    model: str = "fake-model"
    delay: float = Field(0.0, ge=0, description="seconds to wait before every reply")
    jitter: float = Field(0.0, ge=0, le=1, description="each reply waits delay × (1 + jitter × u), u uniform "
                          "in [−1, 1] drawn from the request and its attempt (the same request waits alike)")
    rate_429: float = Field(0.0, ge=0, le=1)
    rate_500: float = Field(0.0, ge=0, le=1)
    rate_timeout: float = Field(0.0, ge=0, le=1)
    rate_drop: float = Field(0.0, ge=0, le=1)
    rate_malformed: float = Field(0.0, ge=0, le=1, description="structured calls only")
    rate_null: float = Field(0.0, ge=0, le=1, description="a 200 completion whose content is null")
    rate_empty: float = Field(0.0, ge=0, le=1, description="a 200 completion whose content is empty")
    rate_length: float = Field(0.0, ge=0, le=1, description="content cut in half, finish_reason 'length'")
    rate_huge: float = Field(0.0, ge=0, le=1, description="content of huge_chars characters")
    huge_chars: int = Field(5_000_000, ge=1, description="length of a 'huge' reply")
    echo_auth: bool = Field(False, description="error bodies echo the Authorization header (clear and base64)")
    timeout_sleep: float = Field(
        30.0, ge=0, description="stall of a timeout fault; exceed the client timeout"
    )
    retry_after: float = Field(1.0, ge=0, description="Retry-After seconds on 429 replies")
    outage: float = Field(0.0, ge=0, description="seconds, from the first chat request, that every request fails")
    outage_status: int = Field(503, ge=400, le=599, description="HTTP status of requests during an outage")
    seed: int = 0
    full_lists: bool = Field(False, description="arrays get maxItems items, as a model that delivers what "
                             "was asked (else a random count within the bounds, which prompts top-ups)")

    @model_validator(mode="after")
    def _rates_fit(self) -> FakeOptions:
        total = sum(self.rates())
        if total > 1 + 1e-9:
            raise ValueError(f"fault rates sum to {total:g}; they must sum to at most 1")
        return self

    def rates(self) -> tuple[float, ...]:
        """The rate of each of :data:`FAULT_KINDS`, in that order."""
        return tuple(getattr(self, f"rate_{kind}") for kind in FAULT_KINDS)


class ServerStats(BaseModel):
    """Counters served at ``GET /stats``.

    Attributes:
        requests_total: Chat completion requests received (valid or not).
        completions: Requests answered with a 200 completion (malformed ones included).
        structured: Of those, structured (JSON) completions.
        faults: Injected faults by kind.
        attempts: Attempts per request body (sha256 of model, messages, response_format).
        in_flight: Chat requests currently being handled.
        max_in_flight: Highest concurrency seen.
        outage_failures: Requests failed by an outage.
    """

    requests_total: int = 0
    completions: int = 0
    structured: int = 0
    faults: dict[str, int] = Field(default_factory=lambda: dict.fromkeys(FAULT_KINDS, 0))
    attempts: dict[str, int] = Field(default_factory=dict)
    in_flight: int = 0
    max_in_flight: int = 0
    outage_failures: int = 0


# --- request helpers ------------------------------------------------------------------------------


def body_key(body: dict[str, Any]) -> str:
    """Hex sha256 of the canonical JSON of the parts of a request that determine the reply."""
    relevant = {name: body.get(name) for name in ("model", "messages", "response_format")}
    canonical = json.dumps(relevant, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _message_text(message: dict[str, Any]) -> str:
    """Text of a chat message whose content is a string or a list of content parts."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def _requested_schema(body: dict[str, Any]) -> tuple[bool, dict[str, Any] | None]:
    """Whether the call is structured, and the JSON schema it asks for (None: any object)."""
    response_format = body.get("response_format")
    if not isinstance(response_format, dict):
        return False, None
    kind = response_format.get("type")
    if kind == "json_schema":
        spec = response_format.get("json_schema") or {}
        return True, spec.get("schema") or {"type": "object"}
    if kind == "json_object":
        return True, response_format.get("schema")
    return False, None


def environment_pool(texts: list[str]) -> list[str]:
    """Names listed in prompts as ``- Name: description`` or ``- Name (category)``, in order."""
    names: dict[str, None] = {}
    for text in texts:
        for match in _POOL_LINE.finditer(text):
            names.setdefault(match.group("name").strip(), None)
    return list(names)


# --- reply generation -----------------------------------------------------------------------------


class SchemaFaker:
    """Generates a JSON value that validates against a JSON schema, deterministically from ``rng``.

    Handles object/properties/required, string (enum, const, minLength/maxLength, a few formats),
    integer/number (inclusive and exclusive bounds), boolean, null, array (items, prefixItems,
    minItems/maxItems, uniqueItems), ``$ref`` (JSON pointers such as ``#/$defs/Name``), anyOf/oneOf
    (a non-null branch) and allOf. An array of strings named ``environments`` is filled from
    ``pool`` when the pool is not empty. ``full`` fills every bounded array to its ``maxItems``.
    """

    def __init__(
        self, root: dict[str, Any], rng: random.Random, pool: list[str], *, full: bool = False
    ) -> None:
        self.root = root
        self.rng = rng
        self.pool = pool
        self.full = full

    def resolve(self, schema: Any) -> dict[str, Any]:
        """Follow ``$ref`` (merging sibling keywords) until a concrete schema remains."""
        if schema is True or schema is None:
            return {}
        while isinstance(schema, dict) and "$ref" in schema:
            target: Any = self.root
            for token in schema["$ref"].removeprefix("#").strip("/").split("/"):
                if token:
                    target = target[token.replace("~1", "/").replace("~0", "~")]
            schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
        return schema

    def value(self, schema: Any, name: str | None = None, depth: int = 0) -> Any:
        """A value valid against ``schema``; ``name`` is the property holding it, if any."""
        schema = self.resolve(schema)
        if "const" in schema:
            return schema["const"]
        if "enum" in schema:
            return self.rng.choice(schema["enum"])
        for keyword in ("anyOf", "oneOf"):
            if keyword in schema:
                return self._one_of(schema[keyword], name, depth)
        if "allOf" in schema:
            return self.value(self._merge_all_of(schema), name, depth)
        kind = schema.get("type")
        if isinstance(kind, list):
            concrete = [k for k in kind if k != "null"]
            kind = concrete[0] if concrete else "null"
        if kind is None:
            kind = "object" if "properties" in schema else "array" if "items" in schema else "string"
        match kind:
            case "object":
                return self._object(schema, depth)
            case "array":
                return self._array(schema, name, depth)
            case "string":
                return self._string(schema)
            case "integer":
                return self._integer(schema)
            case "number":
                return self._number(schema)
            case "boolean":
                return self.rng.random() < 0.5
            case _:
                return None

    def _one_of(self, branches: list[Any], name: str | None, depth: int) -> Any:
        resolved = [self.resolve(branch) for branch in branches]
        concrete = [branch for branch in resolved if branch.get("type") != "null"]
        if not concrete or (depth >= _MAX_DEPTH and len(concrete) < len(resolved)):
            return None
        return self.value(self.rng.choice(concrete), name, depth)

    def _merge_all_of(self, schema: dict[str, Any]) -> dict[str, Any]:
        merged = {k: v for k, v in schema.items() if k != "allOf"}
        for part in map(self.resolve, schema["allOf"]):
            properties = {**part.get("properties", {}), **merged.get("properties", {})}
            required = sorted({*part.get("required", []), *merged.get("required", [])})
            merged = {**part, **merged, "properties": properties, "required": required}
        return merged

    def _object(self, schema: dict[str, Any], depth: int) -> dict[str, Any]:
        properties: dict[str, Any] = schema.get("properties", {})
        required = set(schema.get("required", []))
        result = {
            key: self.value(sub, key, depth + 1)
            for key, sub in properties.items()
            if key in required or depth < _MAX_DEPTH
        }
        extra = schema.get("additionalProperties")
        if not properties and isinstance(extra, dict) and depth < _MAX_DEPTH:
            result["key"] = self.value(extra, "key", depth + 1)
        return result

    def _array(self, schema: dict[str, Any], name: str | None, depth: int) -> list[Any]:
        prefix = schema.get("prefixItems")
        if prefix:
            return [self.value(sub, None, depth + 1) for sub in prefix]
        items = self.resolve(schema.get("items"))
        low, high = schema.get("minItems"), schema.get("maxItems")
        if name == "environments" and self.pool and items.get("type") == "string" and "enum" not in items:
            return self._environments(low, high)
        low = low if low is not None else min(1, high if high is not None else 1)
        high = high if high is not None else max(low, 3)
        if depth >= _MAX_DEPTH:
            high = low
        count = high if self.full and "maxItems" in schema else self.rng.randint(low, high)
        if not schema.get("uniqueItems"):
            return [self.value(items, None, depth + 1) for _ in range(count)]
        unique: dict[str, Any] = {}
        for _ in range(count * 10):
            if len(unique) == count:
                break
            item = self.value(items, None, depth + 1)
            unique.setdefault(json.dumps(item, sort_keys=True), item)
        return list(unique.values())

    def _environments(self, low: int | None, high: int | None) -> list[str]:
        if low is None and high is None:
            count = _DEFAULT_ENVIRONMENTS
        else:
            low = low if low is not None else min(_DEFAULT_ENVIRONMENTS, high or 0)
            count = self.rng.randint(low, high if high is not None else max(low, _DEFAULT_ENVIRONMENTS))
        return self.rng.sample(self.pool, min(count, len(self.pool)))

    def _string(self, schema: dict[str, Any]) -> str:
        formats = {
            "date-time": "2024-05-17T09:30:00Z",
            "date": "2024-05-17",
            "time": "09:30:00",
            "email": "persona@example.com",
            "uri": "https://example.com/persona",
            "uuid": "123e4567-e89b-42d3-a456-426614174000",
        }
        if schema.get("format") in formats:
            return formats[schema["format"]]
        min_length, max_length = schema.get("minLength", 0), schema.get("maxLength")
        words = [self.rng.choice(_VOCABULARY) for _ in range(self.rng.randint(2, 6))]
        text = " ".join(words)
        while len(text) < min_length:
            text += " " + self.rng.choice(_VOCABULARY)
        if max_length is not None and len(text) > max_length:
            text = text[:max_length]
            if len(text.rstrip()) >= min_length:
                text = text.rstrip()
        return text

    @staticmethod
    def _bounds(
        schema: dict[str, Any], default_low: float, default_high: float
    ) -> tuple[float, float, bool, bool]:
        """(low, high, low_exclusive, high_exclusive) with the missing side(s) filled in."""
        low_excl, high_excl = "exclusiveMinimum" in schema, "exclusiveMaximum" in schema
        low = schema.get("minimum", schema.get("exclusiveMinimum"))
        high = schema.get("maximum", schema.get("exclusiveMaximum"))
        if low is None and high is None:
            return default_low, default_high, False, False
        if low is None:
            return high - 10, high, False, high_excl
        if high is None:
            return low, low + 10, low_excl, False
        return low, high, low_excl and "minimum" not in schema, high_excl and "maximum" not in schema

    def _integer(self, schema: dict[str, Any]) -> int:
        low, high, low_excl, high_excl = self._bounds(schema, 0, 10)
        low_int = math.floor(low) + 1 if low_excl else math.ceil(low)
        high_int = math.ceil(high) - 1 if high_excl else math.floor(high)
        return self.rng.randint(low_int, max(low_int, high_int))

    def _number(self, schema: dict[str, Any]) -> float:
        low, high, low_excl, high_excl = self._bounds(schema, 0.0, 10.0)
        value = round(self.rng.uniform(low, high), 2)
        too_low = value < low or (low_excl and value == low)
        too_high = value > high or (high_excl and value == high)
        return (low + high) / 2 if too_low or too_high else value


def free_text(last_user_message: str, rng: random.Random) -> str:
    """A 2-3 sentence paragraph echoing a few words of the last user message."""
    words = list(dict.fromkeys(_WORD.findall(last_user_message)))
    words = [w for w in words if w.lower() not in _STOPWORDS] or words or ["that"]
    picks = [words[i] for i in sorted(rng.sample(range(len(words)), min(3, len(words))))]
    a, b, c = (picks * 3)[:3]
    sentences = rng.sample(_SENTENCES, rng.choice((2, 3)))
    return " ".join(sentence.format(a=a, b=b, c=c) for sentence in sentences)


def truncated_json(text: str) -> str:
    """``text`` cut in half, made sure not to parse as JSON."""
    cut = text[: len(text) // 2]
    try:
        json.loads(cut)
    except json.JSONDecodeError:
        return cut
    return '{"truncated": '


def completion_body(
    body: dict[str, Any], model: str, *, malformed: bool = False, full_lists: bool = False,
    fault: FaultKind | None = None, huge_chars: int = 5_000_000,
) -> dict[str, Any]:
    """The chat completion for a request body; deterministic in (model, messages, response_format)."""
    key = body_key(body)
    rng = random.Random(int(key[:16], 16))
    texts = [_message_text(message) for message in body["messages"] if isinstance(message, dict)]
    structured, schema = _requested_schema(body)
    if structured:
        user_texts = [
            _message_text(m) for m in body["messages"] if isinstance(m, dict) and m.get("role") == "user"
        ]
        if schema is None:
            value: Any = {"answer": free_text(user_texts[-1] if user_texts else "", rng)}
        else:
            value = SchemaFaker(schema, rng, environment_pool(texts), full=full_lists).value(schema)
        content = json.dumps(value, ensure_ascii=False)
        if malformed:
            content = truncated_json(content)
    else:
        users = [m for m in body["messages"] if isinstance(m, dict) and m.get("role") == "user"]
        content = free_text(_message_text(users[-1]) if users else "", rng)
    finish_reason = "stop"
    reply_content: str | None = content
    if fault == "null":
        reply_content = None
    elif fault == "empty":
        reply_content = ""
    elif fault == "length":
        reply_content, finish_reason = content[: len(content) // 2], "length"
    elif fault == "huge":
        reply_content = ("ha" * (huge_chars // 2 + 1))[:huge_chars]
    prompt_tokens = sum(len(text.split()) for text in texts)
    completion_tokens = len((reply_content or "").split())
    return {
        "id": f"chatcmpl-{key[:24]}",
        "object": "chat.completion",
        "created": _CREATED,
        "model": body.get("model") or model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": reply_content, "refusal": None},
                "finish_reason": finish_reason,
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def _error(status: int, message: str, kind: str, headers: dict[str, str] | None = None) -> web.Response:
    payload = {"error": {"message": message, "type": kind, "param": None, "code": kind}}
    return web.json_response(payload, status=status, headers=headers)


# --- server ---------------------------------------------------------------------------------------


class FakeOpenAI:
    """The server, run in the current event loop: ``async with FakeOpenAI(delay=0.1) as server``."""

    def __init__(self, options: FakeOptions | None = None, **overrides: Any) -> None:
        """Configure from ``options`` and/or keyword overrides (fields of :class:`FakeOptions`)."""
        base = options.model_dump() if options else {}
        self.options = FakeOptions(**{**base, **overrides})
        self._stats = ServerStats()
        self._runner: web.AppRunner | None = None
        self._port: int | None = None
        self._outage_until: float | None = None  # monotonic end of the outage, once it has started

    def start_outage(self, seconds: float) -> None:
        """Fails every chat request for ``seconds`` from now (0 ends an outage at once)."""
        self._outage_until = time.monotonic() + seconds

    def _in_outage(self) -> bool:
        if self._outage_until is None and self.options.outage > 0:
            self.start_outage(self.options.outage)  # the first chat request starts the configured outage
        return self._outage_until is not None and time.monotonic() < self._outage_until

    @property
    def url(self) -> str:
        """Root URL, e.g. ``http://127.0.0.1:PORT`` (stats live under it)."""
        if self._port is None:
            raise RuntimeError("the fake OpenAI server is not running")
        return f"http://{self.options.host}:{self._port}"

    @property
    def base_url(self) -> str:
        """OpenAI base URL, e.g. ``http://127.0.0.1:PORT/v1``."""
        return f"{self.url}/v1"

    def stats(self) -> ServerStats:
        """A snapshot of the counters."""
        return self._stats.model_copy(deep=True)

    def reset(self) -> None:
        """Zero the counters and the per-body attempt numbers (in-flight count is kept)."""
        self._stats = ServerStats(in_flight=self._stats.in_flight)

    def app(self) -> web.Application:
        """The aiohttp application."""
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/stats", self._get_stats)
        app.router.add_post("/stats/reset", self._reset_stats)
        return app

    async def start(self) -> None:
        """Bind and start serving; the port is known afterwards."""
        # handler_cancellation: a handler stalled by a timeout fault stops when its client leaves.
        runner = web.AppRunner(self.app(), access_log=None, handler_cancellation=True, shutdown_timeout=0.5)
        await runner.setup()
        site = web.TCPSite(runner, self.options.host, self.options.port)
        await site.start()
        self._runner = runner
        self._port = runner.addresses[0][1]

    async def stop(self) -> None:
        """Stop serving and release the port."""
        if self._runner is not None:
            await self._runner.cleanup()
        self._runner, self._port = None, None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    def _delay(self, key: str, attempt: int) -> float:
        """The wait before a reply: ``delay``, spread by ``jitter`` (see :class:`FakeOptions`)."""
        if not self.options.jitter:
            return self.options.delay
        u = 2 * random.Random(f"{self.options.seed}:delay:{key}:{attempt}").random() - 1
        return self.options.delay * (1 + self.options.jitter * u)

    def _draw_fault(self, key: str, attempt: int, structured: bool) -> FaultKind | None:
        """Fault for this attempt, from a uniform draw seeded by (seed, body, attempt)."""
        digest = hashlib.sha256(f"{self.options.seed}:{key}:{attempt}".encode()).digest()
        draw = int.from_bytes(digest[:8], "big") / 2**64
        edge = 0.0
        for kind, rate in zip(FAULT_KINDS, self.options.rates(), strict=True):
            edge += rate
            if draw < edge:
                return None if kind == "malformed" and not structured else kind
        return None

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        self._stats.requests_total += 1
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return _error(400, "request body is not JSON", "invalid_request_error")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or not body["messages"]:
            return _error(400, "'messages' must be a non-empty list", "invalid_request_error")
        if body.get("stream"):
            return _error(400, "streaming is not supported by the fake server", "invalid_request_error")

        if self._in_outage():
            self._stats.outage_failures += 1
            return _error(self.options.outage_status, "service unavailable (outage)", "server_error")
        key = body_key(body)
        attempt = self._stats.attempts.get(key, 0) + 1
        self._stats.attempts[key] = attempt
        structured, _ = _requested_schema(body)
        fault = self._draw_fault(key, attempt, structured)
        if fault:
            self._stats.faults[fault] += 1
        self._stats.in_flight += 1
        self._stats.max_in_flight = max(self._stats.max_in_flight, self._stats.in_flight)
        try:
            if self.options.delay:
                await asyncio.sleep(self._delay(key, attempt))
            echo = self._echo(request)
            if fault == "429":
                retry_after = f"{self.options.retry_after:g}"
                return _error(
                    429, f"rate limited (injected){echo}", "rate_limit_exceeded", {"Retry-After": retry_after}
                )
            if fault == "500":
                return _error(500, f"internal error (injected){echo}", "server_error")
            if fault == "drop":
                assert request.transport is not None
                request.transport.close()
                raise asyncio.CancelledError  # nothing more to send on a closed connection
            if fault == "timeout":
                await asyncio.sleep(self.options.timeout_sleep)
            reply = completion_body(body, self.options.model, malformed=fault == "malformed",
                                    full_lists=self.options.full_lists, fault=fault,
                                    huge_chars=self.options.huge_chars)
            self._stats.completions += 1
            self._stats.structured += structured
            return web.json_response(reply)
        finally:
            self._stats.in_flight -= 1

    def _echo(self, request: web.Request) -> str:
        """What an error body adds with ``echo_auth``: the Authorization header, plain and base64."""
        header = request.headers.get("Authorization", "")
        if not (self.options.echo_auth and header):
            return ""
        return f" (you sent {header!r}, i.e. {base64.b64encode(header.encode()).decode()})"

    async def _models(self, request: web.Request) -> web.Response:
        model = {"id": self.options.model, "object": "model", "created": _CREATED, "owned_by": "personagraph"}
        return web.json_response({"object": "list", "data": [model]})

    async def _get_stats(self, request: web.Request) -> web.Response:
        return web.json_response(self._stats.model_dump())

    async def _reset_stats(self, request: web.Request) -> web.Response:
        self.reset()
        return web.json_response(self._stats.model_dump())


class ThreadedFakeOpenAI:
    """Handle on a server running in a background thread with its own event loop."""

    def __init__(self, server: FakeOpenAI, loop: asyncio.AbstractEventLoop, thread: threading.Thread) -> None:
        self.server = server
        self._loop = loop
        self._thread = thread

    @property
    def base_url(self) -> str:
        """OpenAI base URL, e.g. ``http://127.0.0.1:PORT/v1``."""
        return self.server.base_url

    @property
    def url(self) -> str:
        """Root URL of the server."""
        return self.server.url

    def stats(self) -> ServerStats:
        """A snapshot of the counters, taken in the server's loop."""
        return self._call(self.server.stats)

    def reset(self) -> None:
        """Zero the counters and attempt numbers."""
        self._call(self.server.reset)

    def start_outage(self, seconds: float) -> None:
        """Fails every chat request for ``seconds`` from now (0 ends an outage)."""
        self._call(lambda: self.server.start_outage(seconds))

    def stop(self) -> None:
        """Stop the server, its loop and its thread. Idempotent."""
        if self._loop.is_closed():
            return
        asyncio.run_coroutine_threadsafe(self.server.stop(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _call(self, function: Any) -> Any:
        async def run() -> Any:
            return function()

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(timeout=10)


def start_in_thread(options: FakeOptions | None = None, **overrides: Any) -> ThreadedFakeOpenAI:
    """Start a server in a daemon thread; returns once it accepts connections.

    Args:
        options: Base configuration.
        **overrides: Fields of :class:`FakeOptions`, e.g. ``delay=0.1, rate_429=0.5``.

    Returns:
        A handle with ``base_url``, ``stats()``, ``reset()`` and ``stop()``; also a context manager.
    """
    server = FakeOpenAI(options, **overrides)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="fake-openai", daemon=True)
    thread.start()
    try:
        asyncio.run_coroutine_threadsafe(server.start(), loop).result(timeout=10)
    except BaseException:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()
        raise
    return ThreadedFakeOpenAI(server, loop, thread)


# --- command line ---------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> FakeOptions:
    """Options from the command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port (printed on stdout)")
    parser.add_argument("--model", default="fake-model")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before every reply")
    parser.add_argument("--jitter", type=float, default=0.0,
                        help="spread of each reply's delay: delay × (1 ± jitter), drawn per request")
    parser.add_argument("--rate-429", type=float, default=0.0)
    parser.add_argument("--rate-500", type=float, default=0.0)
    parser.add_argument("--rate-timeout", type=float, default=0.0)
    parser.add_argument("--rate-drop", type=float, default=0.0)
    parser.add_argument("--rate-malformed", type=float, default=0.0, help="structured replies cut off mid-JSON")
    parser.add_argument("--rate-null", type=float, default=0.0, help="200 replies whose content is null")
    parser.add_argument("--rate-empty", type=float, default=0.0, help="200 replies whose content is empty")
    parser.add_argument("--rate-length", type=float, default=0.0, help="replies cut in half, finish_reason length")
    parser.add_argument("--rate-huge", type=float, default=0.0, help="replies of --huge-chars characters")
    parser.add_argument("--huge-chars", type=int, default=5_000_000)
    parser.add_argument("--echo-auth", action="store_true", help="error bodies echo the Authorization header")
    parser.add_argument("--timeout-sleep", type=float, default=30.0, help="stall of a timeout fault")
    parser.add_argument("--retry-after", type=float, default=1.0, help="Retry-After seconds on 429s")
    parser.add_argument("--outage", type=float, default=0.0,
                        help="seconds, from the first chat request, that every request fails")
    parser.add_argument("--outage-status", type=int, default=503, help="HTTP status during an outage")
    parser.add_argument("--seed", type=int, default=0, help="seed of the fault draws")
    parser.add_argument("--full-lists", action="store_true", help="fill arrays to maxItems")
    return FakeOptions(**vars(parser.parse_args(argv)))


async def serve(options: FakeOptions) -> None:
    """Serve until SIGINT or SIGTERM, announcing the base URL on stdout first."""
    stopped = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stopped.set)
    async with FakeOpenAI(options) as server:
        print(f"listening on {server.base_url}", flush=True)
        await stopped.wait()


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    asyncio.run(serve(parse_args(argv)))


if __name__ == "__main__":
    main()
