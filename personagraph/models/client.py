"""ModelClient: every LLM call of every role goes cache → limiter → provider (with retries) → validation.

Where a call goes (endpoint, key, concurrency, structured-output mode) is resolved once by the factory
(:func:`~personagraph.models.factory.resolve_route`) from the provider rules; a client is known by its
:attr:`ModelClient.name` everywhere (verdicts, summaries, self-judging checks). Every call is a LangSmith
LLM run when tracing is on (:mod:`personagraph.models.tracing`).

A call that fails is a value (``status="failed"`` with the raw text and the reason), never an exception
that kills a batch and never a score; an error message is never returned as if the model had said it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import re
import time
import weakref
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Generic, Literal, TypeVar

from langchain_core.language_models.chat_models import BaseChatModel
from pydantic import BaseModel, ValidationError

from personagraph.models import openai_http, tracing
from personagraph.models.engine import EngineFailed, engine_for, explain_refusal
from personagraph.models.factory import Route, resolve_route
from personagraph.models.openai_http import ChatReply, TokenLogprobs, parse_logprobs
from personagraph.models.retry import WAIT_NOTICE_S, RetryPolicy, classify, notify_wait
from personagraph.models.settings import ModelSettings
from personagraph.models.spec import ModelSpec, parse_spec
from personagraph.models.testing import scripted_call
from personagraph.redact import redact_known, redact_text, register_secret
from personagraph.store import CallRow, RunStore

T = TypeVar("T", bound=BaseModel)
Messages = list[dict[str, str]]
Status = Literal["ok", "failed"]


class _ScrubbedError:
    """A reply whose ``error`` is scrubbed of credentials (a 401 body may echo the API key) on creation,
    before anything stores or prints it."""

    error: str | None

    def __post_init__(self) -> None:
        if self.error:
            self.error = redact_text(self.error)


@dataclass
class Completion(_ScrubbedError):
    """A free-text reply. ``text`` is what the model said ("" when it said nothing or failed).

    ``logprobs``: one entry per generated token when the call asked for them (``top_logprobs=k``) and the
    provider returns them; None otherwise. Tokens are the provider's counts (stored ones for a cache hit).
    """

    status: Status
    text: str = ""
    error: str | None = None
    cached: bool = False
    logprobs: list[TokenLogprobs] | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    truncated: bool = False  # longer than its max_tokens budget allows: cut there and marked (TRUNCATED_MARK)
    at_token_limit: bool = False  # as many tokens generated as max_tokens allowed: most likely cut off mid-way

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass
class Structured(_ScrubbedError, Generic[T]):
    """A structured reply: ``value`` is the validated object, ``raw`` the model's text as received.

    ``logprobs`` are those of the tokens of ``raw`` (see :class:`Completion`).
    """

    status: Status
    value: T | None = None
    raw: str = ""
    error: str | None = None
    cached: bool = False
    logprobs: list[TokenLogprobs] | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass
class Meter:
    """Counts what an invocation did, per role: calls sent, cache hits, tokens, failures."""

    calls: dict[str, int] = field(default_factory=dict)
    cache_hits: dict[str, int] = field(default_factory=dict)
    input_tokens: dict[str, int] = field(default_factory=dict)
    output_tokens: dict[str, int] = field(default_factory=dict)
    failures: dict[str, int] = field(default_factory=dict)

    @staticmethod
    def _add(counter: dict[str, int], role: str, n: int = 1) -> None:
        counter[role] = counter.get(role, 0) + n

    @property
    def total_calls(self) -> int:
        return sum(self.calls.values())

    @property
    def total_cache_hits(self) -> int:
        return sum(self.cache_hits.values())

    def as_dict(self) -> dict[str, Any]:
        roles = sorted(set(self.calls) | set(self.cache_hits) | set(self.failures))
        return {
            role: {
                "calls": self.calls.get(role, 0),
                "cache_hits": self.cache_hits.get(role, 0),
                "input_tokens": self.input_tokens.get(role, 0),
                "output_tokens": self.output_tokens.get(role, 0),
                "failures": self.failures.get(role, 0),
            }
            for role in roles
        }


_limiters: dict[tuple[str, int, int], tuple[weakref.ref[asyncio.AbstractEventLoop], asyncio.Semaphore]] = {}


def _limiter(key: str, limit: int) -> asyncio.Semaphore:
    """One semaphore per limit key (:attr:`Route.limit_key`) and event loop, shared by every role using it.

    The key is the endpoint for a self-hosted server, so that a concurrency of C means at most C requests
    in flight to that server whatever the number of models it serves, and endpoint + model on a hosted
    service (OpenAI's own API limits each model separately).
    """
    loop = asyncio.get_running_loop()
    slot = (key, limit, id(loop))  # the limit too: a later run in this loop may ask for another
    entry = _limiters.get(slot)
    if entry is None or entry[0]() is not loop:  # the id of a closed loop can be reused
        entry = _limiters[slot] = (weakref.ref(loop), asyncio.Semaphore(limit))
    return entry[1]


_in_flight: dict[tuple[int, str, bool], asyncio.Future[Completion]] = {}
"""The calls being sent now, by event loop, cache key and kind: what :meth:`ModelClient._cached_call` waits
for instead of sending an identical request again."""


def _retrieved(future: asyncio.Future[Any]) -> None:
    """Marks a single-flight future's exception as seen (its callers got it)."""
    if not future.cancelled():
        future.exception()


def cache_key(spec: str, base_url: str, messages: Messages, params: dict[str, Any]) -> str:
    """The response-cache key: model spec + endpoint + messages + sampling parameters."""
    blob = json.dumps({"model": spec, "base_url": base_url, "messages": messages, "params": params},
                      sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)

MAX_CHARS_PER_TOKEN = 16
"""A reply longer than ``max_tokens`` × this (tokens average ~4 characters; whitespace and code runs reach
~16) was not held to its token budget by the server: it is cut there (:data:`TRUNCATED_MARK`), never stored
or forwarded whole (a 5 MB answer to a 256-token request would be sent on to every judge)."""
STILL_WAITING_S = 30.0
"""A request to an API endpoint still unanswered after this long is announced (one line), so that a stalled
connection is seen waiting for its ``--timeout``, not taken for a hang."""
MIN_BUDGET_CHARS = 1024
TRUNCATED_MARK = "\n[truncated: the reply ran past its max_tokens budget]"
_NUMBER_PART = re.compile(r"[-+0-9.eE]+")


def at_token_limit(output_tokens: int, params: dict[str, Any]) -> bool:
    """Whether a reply of ``output_tokens`` used the whole ``max_tokens`` of its request: the provider stopped
    it there, so it most likely ends mid-sentence (a stored reply keeps its token count, not the reason the
    provider stopped)."""
    limit = params.get("max_tokens")
    return bool(limit) and output_tokens >= limit


def char_budget(max_tokens: int | None) -> int | None:
    """The most characters a reply to a request of ``max_tokens`` may hold (None: no budget)."""
    return None if not max_tokens else max(MIN_BUDGET_CHARS, max_tokens * MAX_CHARS_PER_TOKEN)


def bounded(text: str, max_tokens: int | None) -> tuple[str, bool]:
    """A free-text reply cut to the budget of ``max_tokens`` and marked (:data:`TRUNCATED_MARK`), and whether
    it was (a reply cut when it was stored is returned as it is)."""
    budget = char_budget(max_tokens)
    if budget is None or len(text) <= budget:
        return text, False
    if text.endswith(TRUNCATED_MARK) and len(text) == budget + len(TRUNCATED_MARK):
        return text, True
    return text[:budget] + TRUNCATED_MARK, True


def cut_off_json(text: str) -> bool:
    """Whether ``text`` holds the beginning of a JSON object that stops before the object ends (a reply cut
    off mid-JSON: by ``max_tokens``, a dropped stream or a faulty server), as opposed to text that is not
    JSON at all. A cut-off reply is a fault that another attempt can pass; an unparsable one is the model's."""
    start = text.find("{")
    if start < 0:
        return False
    candidate = text[start:].rstrip().removesuffix("```").rstrip()
    try:
        json.loads(candidate)
    except json.JSONDecodeError as exc:
        rest = candidate[exc.pos:]
        return (exc.msg.startswith("Unterminated string") or not rest
                or any(word.startswith(rest) for word in ("true", "false", "null"))
                or _NUMBER_PART.fullmatch(rest) is not None)
    except (ValueError, RecursionError):  # a number past the digit limit, nesting too deep: not cut off
        return False
    return False


def structured_problem(text: str, finish_reason: str | None) -> str | None:
    """Why a structured call's reply is a transient fault (retried, never stored), or None when it is the
    model's complete answer (valid or not: validation and the format reminder deal with it)."""
    if not text.strip():
        return "the reply is empty"
    try:
        extract_json(text)
        return None
    except ValueError:
        pass
    if finish_reason == "length":
        return "the reply was cut off by max_tokens before its JSON ended"
    if cut_off_json(text):
        return "the reply was cut off mid-JSON"
    return None


def extract_json(text: str) -> Any:
    """Parses the JSON object in a reply, tolerating code fences and prose around it.

    Raises:
        ValueError: when no JSON object can be parsed.
    """
    candidates = [text.strip()]
    candidates += [m.strip() for m in _FENCE.findall(text)]
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start : end + 1])
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except (ValueError, RecursionError):  # not JSON, a 5000-digit number, nested too deep
            continue
        if isinstance(value, dict):
            return value
    raise ValueError("no JSON object found in the reply")


def parse_structured(text: str, schema: type[T]) -> T:
    """The JSON object in a reply (:func:`extract_json`) validated against ``schema``; a ``true`` or ``false``
    where the schema wants a number is refused (pydantic would read ``{"score": true}`` as a score of 1).

    Raises:
        ValueError: no JSON object, or a bool for a number (``ValidationError`` is one).
    """
    value = extract_json(text)
    if (where := _bool_for_number(value, _json_schema(schema))) is not None:
        raise ValueError(f"{where}: a bool where a number belongs")
    return schema.model_validate(value)


def _bool_for_number(value: Any, schema: dict[str, Any], root: dict[str, Any] | None = None,
                     where: str = "object") -> str | None:
    """Where ``value`` holds a bool that ``schema`` (a JSON schema) types as a number, or None."""
    root = root or schema
    if ref := schema.get("$ref"):
        schema = root.get("$defs", {}).get(ref.rsplit("/", 1)[-1], {})
    options = schema.get("anyOf") or [schema]
    kinds = {option.get("type") for option in options}
    if isinstance(value, bool):
        return where if kinds & {"integer", "number"} and "boolean" not in kinds else None
    for option in options:
        if isinstance(value, dict) and "properties" in option:
            for name, sub in option["properties"].items():
                if name in value and (found := _bool_for_number(value[name], sub, root, name)) is not None:
                    return found
        elif isinstance(value, list) and isinstance(option.get("items"), dict):
            for i, item in enumerate(value):
                if (found := _bool_for_number(item, option["items"], root, f"{where}.{i}")) is not None:
                    return found
    return None


@lru_cache(maxsize=256)
def _json_schema(schema: type[BaseModel]) -> dict[str, Any]:
    """``schema.model_json_schema()``, built once per class (it costs ~1 ms; do not mutate the result)."""
    return schema.model_json_schema()


@lru_cache(maxsize=256)
def format_instructions(schema: type[BaseModel]) -> str:
    """A compact description of the expected JSON object, appended to structured prompts."""
    props = _json_schema(schema).get("properties", {})
    lines = []
    for name, prop in props.items():
        kind = prop.get("type", "value")
        if "minimum" in prop and "maximum" in prop:
            kind = f"{kind} from {prop['minimum']} to {prop['maximum']}"
        if kind == "array":
            kind = f"list of {prop.get('items', {}).get('type', 'value')}s"
            if "maxItems" in prop:
                kind += f", at most {prop['maxItems']}"
        desc = f": {prop['description']}" if prop.get("description") else ""
        lines.append(f'- "{name}" ({kind}){desc}')
    return "Reply with only a JSON object with these keys, in this order:\n" + "\n".join(lines)


class ModelClient:
    """One role's handle on one model: cached, rate-limited, retried and validated calls.

    Use :meth:`create`; ``store`` (a run's store) makes calls resumable: a call whose key is stored is
    answered from the store and never sent again. ``chat_model`` replaces the provider's transport with
    any LangChain chat model (tests inject failing ones); LangChain traces those calls itself.
    """

    def __init__(
        self,
        spec: ModelSpec,
        role: str,
        settings: ModelSettings,
        route: Route,
        *,
        chat_model: BaseChatModel | None = None,
        store: RunStore | None = None,
        meter: Meter | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.spec = spec
        self.role = role
        self.route = route
        self.chat_model = chat_model
        self.settings = settings
        self.store = store
        self.meter = meter or Meter()
        self.retry = retry or RetryPolicy(attempts=settings.retry_attempts, max_retry_after_s=settings.max_retry_after_s)
        register_secret(route.api_key or None)
        # local: specs go to their model's llama.cpp server (models/engine.py); it starts at the first call
        self._engine = engine_for(spec.name) if route.rules.transport == "engine" else None

    @property
    def name(self) -> str:
        """The model's identity in a run (``provider[@endpoint]:model``): what verdicts, summaries and the
        self-judging check compare; roles sharing a model share it."""
        return str(self.spec)

    @classmethod
    def create(
        cls,
        spec: str | ModelSpec,
        role: str,
        *,
        store: RunStore | None = None,
        meter: Meter | None = None,
        settings: ModelSettings | None = None,
        **overrides: Any,
    ) -> ModelClient:
        """Builds a client for ``spec`` playing ``role``; ``overrides`` update ``settings`` fields."""
        parsed = parse_spec(spec) if isinstance(spec, str) else spec
        settings = (settings or ModelSettings()).model_copy(update=overrides)
        return cls(parsed, role, settings, resolve_route(parsed, settings), store=store, meter=meter)

    # --- the one path every call takes ----------------------------------------------------------
    def _params(self, response_format: dict[str, Any] | None, top_logprobs: int | None) -> dict[str, Any]:
        params: dict[str, Any] = {
            "temperature": self.settings.temperature,
            "max_tokens": self.settings.max_tokens,
            "seed": self.settings.seed,
        }
        if response_format:
            params["response_format"] = response_format
        if top_logprobs and self.route.rules.logprobs:  # only when asked: other calls keep their cache keys
            params["logprobs"] = True
            params["top_logprobs"] = top_logprobs
        return params

    async def _call(
        self, messages: Messages, response_format: dict[str, Any] | None, top_logprobs: int | None = None,
        *, structured: bool = False, fresh: bool = False,
    ) -> Completion:
        params = self._params(response_format, top_logprobs)
        if not tracing.enabled():
            return await self._cached_call(messages, params, response_format, structured, fresh)
        async with tracing.llm_run(self.name, role=self.role, provider=self.spec.provider,
                                   model=self.spec.name, endpoint=self.route.endpoint,
                                   messages=messages, params=params) as run:
            reply = await self._cached_call(messages, params, response_format, structured, fresh)
            tracing.finish(run, text=reply.text, error=reply.error, cached=reply.cached,
                           input_tokens=reply.input_tokens, output_tokens=reply.output_tokens)
        return reply

    def _problem(self, text: str, finish_reason: str | None, params: dict[str, Any],
                 structured: bool) -> str | None:
        """Why a structured reply cannot be used though another attempt may pass (None: usable): empty, cut off
        mid-JSON or longer than its token budget. Such a reply is retried like a dropped connection and never
        stored, so a rerun asks again (one stored by an older version is asked again too). A free-text reply
        has no such problem: an empty one is returned as it is (and not stored), a long one is cut."""
        if not structured:
            return None
        if not text.strip():
            return "the reply is empty"
        budget = char_budget(params.get("max_tokens"))
        if budget is not None and len(text) > budget:
            return f"the reply is {len(text)} characters, more than its max_tokens budget allows ({budget})"
        return structured_problem(text, finish_reason)

    @staticmethod
    def _bounded(text: str, params: dict[str, Any]) -> tuple[str, bool]:
        return bounded(text, params.get("max_tokens"))

    async def _cached_call(
        self, messages: Messages, params: dict[str, Any], response_format: dict[str, Any] | None,
        structured: bool = False, fresh: bool = False,
    ) -> Completion:
        """One call: from the response cache, or sent (with retries) and stored. ``fresh``: sent even when a
        reply is stored, which the new one replaces (``retry_permanent``).

        Single flight: a call whose request is already in flight in this event loop (the same model, endpoint,
        messages and parameters: the fixed refusal arm's samples, two roles asking the same) waits for that
        one's reply and is counted as a cache hit, instead of paying for it twice. If the call it waited for
        was cancelled, it is sent after all."""
        key = cache_key(self.name, self.route.cache_url, messages, params)
        flight = (id(asyncio.get_running_loop()), key, structured)
        if not fresh and (pending := _in_flight.get(flight)) is not None:
            try:
                reply = await asyncio.shield(pending)
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if not pending.cancelled() or (task is not None and task.cancelling()):
                    raise  # this call is being cancelled, not only the one it waited for
            else:
                if reply.ok:
                    self.meter._add(self.meter.cache_hits, self.role)
                    return dataclasses.replace(reply, cached=True)
                return reply
        future: asyncio.Future[Completion] = asyncio.get_running_loop().create_future()
        future.add_done_callback(_retrieved)
        _in_flight[flight] = future
        try:
            reply = await self._call_once(key, messages, params, response_format, structured, fresh)
        except asyncio.CancelledError:
            future.cancel()
            raise
        except BaseException as exc:
            future.set_exception(exc)
            raise
        finally:
            if _in_flight.get(flight) is future:
                del _in_flight[flight]
        future.set_result(reply)
        return reply

    async def _call_once(
        self, key: str, messages: Messages, params: dict[str, Any], response_format: dict[str, Any] | None,
        structured: bool, fresh: bool,
    ) -> Completion:
        """:meth:`_cached_call` for a request not already in flight."""
        stale = fresh  # a stored reply that is a transient fault (stored by an older version): replaced
        if not fresh and self.store is not None and (row := self.store.get_call(key)) is not None:
            if row.text.strip() and self._problem(row.text, None, params, structured) is None:
                self.meter._add(self.meter.cache_hits, self.role)
                logprobs = parse_logprobs({"content": row.logprobs}) if params.get("top_logprobs") else None
                text, truncated = self._bounded(row.text, params)
                return Completion("ok", text, cached=True, logprobs=logprobs, truncated=truncated,
                                  input_tokens=row.input_tokens, output_tokens=row.output_tokens,
                                  at_token_limit=at_token_limit(row.output_tokens, params))
            stale = True
        last_error = "no attempt made"
        for attempt in range(self.retry.attempts):
            started = time.perf_counter()
            retry_after: float | None = None
            try:
                async with _limiter(self.route.limit_key, self._concurrency):
                    sent = await self._send(messages, params, response_format)
                text, tokens_in, tokens_out, logprobs, finish_reason = sent
            except EngineFailed:  # an embedded engine died twice: the run stops with its one line
                raise
            except Exception as exc:  # noqa: BLE001 - classified below; permanent errors end the call
                transient = classify(exc)
                if transient is None:
                    self.meter._add(self.meter.failures, self.role)
                    return Completion("failed", error=f"{type(exc).__name__}: {exc}"[:500])
                last_error, retry_after = str(transient)[:500], transient.retry_after
            else:
                latency = time.perf_counter() - started
                self.meter._add(self.meter.calls, self.role)
                self.meter._add(self.meter.input_tokens, self.role, tokens_in)
                self.meter._add(self.meter.output_tokens, self.role, tokens_out)
                problem = self._problem(text, finish_reason, params, structured)
                if problem is None and not text.strip():  # the caller decides what saying nothing means; a
                    return Completion("ok", "", input_tokens=tokens_in, output_tokens=tokens_out)  # rerun asks again
                if problem is None:
                    return self._keep(key, messages, params, text, tokens_in, tokens_out, latency, logprobs,
                                      replace=stale)
                last_error = problem
            if attempt + 1 < self.retry.attempts:
                delay = self.retry.delay(attempt, retry_after)
                if delay >= WAIT_NOTICE_S:
                    notify_wait(f"{self.name}: {last_error[:120]}; waiting {delay:.1f} s before attempt "
                                f"{attempt + 2} of {self.retry.attempts}")
                await asyncio.sleep(delay)
        self.meter._add(self.meter.failures, self.role)
        return Completion("failed", error=f"gave up after {self.retry.attempts} attempts: {last_error}")

    def _keep(self, key: str, messages: Messages, params: dict[str, Any], text: str, tokens_in: int,
              tokens_out: int, latency: float, logprobs: list[TokenLogprobs] | None, *, replace: bool) -> Completion:
        """Stores a usable reply (cut to its budget, secrets this process knows scrubbed: an endpoint may echo
        the key) and returns it."""
        text, truncated = self._bounded(redact_known(text), params)
        if not params.get("top_logprobs"):
            logprobs = None
        if self.store is not None:
            row = CallRow(key, self.role, self.name, text, tokens_in, tokens_out, latency, _logprob_rows(logprobs))
            request = {"messages": messages, "params": params}
            if replace:  # over a stored transient fault; a plain put_call keeps the first row of a key
                self.store.put_call(row, request, replace=True)
            else:
                self.store.put_call(row, request)
        return Completion("ok", text, logprobs=logprobs, input_tokens=tokens_in, output_tokens=tokens_out,
                          truncated=truncated, at_token_limit=at_token_limit(tokens_out, params))

    @property
    def _concurrency(self) -> int:
        return self.settings.concurrency if self.chat_model is not None else self.route.concurrency

    async def _send(
        self, messages: Messages, params: dict[str, Any], response_format: dict[str, Any] | None
    ) -> tuple[str, int, int, list[TokenLogprobs] | None, str | None]:
        """One attempt at the provider: (text, input tokens, output tokens, logprobs, finish reason); errors
        propagate."""
        if self.chat_model is not None:
            return await self._send_chat_model(messages, params, response_format)
        body = {"model": self.spec.name, "messages": messages, **params}
        reply: ChatReply
        if self._engine is not None:  # no timeout: a dead engine drops the connection, a busy one is slow
            try:
                async with self._engine.pinned(messages) as (url, slot):
                    reply = await openai_http.chat_completion(url, "", {**body, **slot}, timeout_s=None)
            except openai_http.PermanentModelError as exc:
                raise openai_http.PermanentModelError(explain_refusal(str(exc))) from None
        elif self.route.rules.transport == "scripted":
            reply = await scripted_call(self.spec.name, body)
        else:
            notice = asyncio.get_running_loop().call_later(
                STILL_WAITING_S, notify_wait, f"{self.name}: still waiting for a reply after {STILL_WAITING_S:g} s "
                f"(retried after {self.settings.timeout_s:g} s: --timeout)")
            try:
                reply = await openai_http.chat_completion(self.route.url, self.route.api_key, body,
                                                          timeout_s=self.settings.timeout_s)
            finally:
                notice.cancel()
        return reply.text, reply.input_tokens, reply.output_tokens, reply.logprobs, reply.finish_reason

    async def _send_chat_model(
        self, messages: Messages, params: dict[str, Any], response_format: dict[str, Any] | None
    ) -> tuple[str, int, int, list[TokenLogprobs] | None, str | None]:
        assert self.chat_model is not None
        kwargs: dict[str, Any] = {"response_format": response_format} if response_format else {}
        if params.get("top_logprobs"):  # LangChain models put them in response_metadata["logprobs"], if at all
            kwargs.update(logprobs=True, top_logprobs=params["top_logprobs"])
        result = await asyncio.wait_for(self.chat_model.ainvoke(messages, **kwargs), self.settings.timeout_s)
        text = result.content if isinstance(result.content, str) else str(result.content)
        usage = result.usage_metadata or {}
        logprobs = parse_logprobs(result.response_metadata.get("logprobs"))
        finish = result.response_metadata.get("finish_reason")
        return (text, usage.get("input_tokens", 0), usage.get("output_tokens", 0), logprobs,
                finish if isinstance(finish, str) else None)

    # --- public API -----------------------------------------------------------------------------
    async def complete(self, messages: Messages, *, top_logprobs: int | None = None) -> Completion:
        """A free-text reply. An empty reply is ``ok`` with ``text == ""`` (callers decide what it means) and
        never stored, so a rerun asks again; a reply past its token budget is cut and marked (``truncated``).

        ``top_logprobs=k`` asks for each generated token's k most likely alternatives (``logprobs``).
        """
        return await self._call(messages, None, top_logprobs)

    def _response_format(self, schema: type[BaseModel]) -> dict[str, Any] | None:
        mode = self.route.structured
        json_schema = _json_schema(schema)
        if mode == "json_schema":
            return {"type": "json_schema",
                    "json_schema": {"name": schema.__name__, "schema": json_schema, "strict": False}}
        if mode == "json_object":
            return {"type": "json_object", "schema": json_schema}
        return None

    async def structured(
        self, messages: Messages, schema: type[T], *, top_logprobs: int | None = None
    ) -> Structured[T]:
        """A reply validated against ``schema``; one retry with a format reminder, then ``failed``.

        ``top_logprobs=k``: as in :meth:`complete`, for the reply that validated. A reply cut off, empty or
        ``null`` is a transient fault (retried, never stored); a complete reply that does not fit is the
        permanent ``invalid structured output`` — asked again past the cache once per run when the settings
        say ``retry_permanent``.
        """
        result = await self._structured(messages, schema, top_logprobs, fresh=False)
        if (self.settings.retry_permanent and result.cached and result.error
                and result.error.startswith("invalid structured output")):
            result = await self._structured(messages, schema, top_logprobs, fresh=True)
        return result

    async def _structured(
        self, messages: Messages, schema: type[T], top_logprobs: int | None, *, fresh: bool
    ) -> Structured[T]:
        prompt = [dict(m) for m in messages]
        prompt[-1]["content"] = f"{prompt[-1]['content']}\n\n{format_instructions(schema)}"
        response_format = self._response_format(schema)
        reply = await self._call(prompt, response_format, top_logprobs, structured=True, fresh=fresh)
        cached = reply.cached
        if not reply.ok:
            return Structured("failed", error=reply.error)
        error = ""
        for attempt in range(2):
            try:
                value = parse_structured(reply.text, schema)
                return Structured("ok", value, reply.text, cached=cached, logprobs=reply.logprobs)
            except (ValueError, ValidationError) as exc:
                error = _short_error(exc)
            if attempt == 0:
                retry_prompt = prompt + [
                    {"role": "assistant", "content": reply.text},
                    {"role": "user", "content": f"That reply was not valid ({error}). "
                                                f"{format_instructions(schema)}"},
                ]
                reply = await self._call(retry_prompt, response_format, top_logprobs, structured=True, fresh=fresh)
                cached = cached and reply.cached
                if not reply.ok:
                    return Structured("failed", raw="", error=reply.error)
        self.meter._add(self.meter.failures, self.role)
        return Structured("failed", raw=reply.text, error=f"invalid structured output: {error}", cached=cached)


def _logprob_rows(logprobs: list[TokenLogprobs] | None) -> list[dict[str, Any]] | None:
    """Logprobs as stored with a call: OpenAI's ``logprobs.content`` format, read back by ``parse_logprobs``."""
    if logprobs is None:
        return None
    return [{"token": t.token, "logprob": t.logprob,
             "top_logprobs": [{"token": alt, "logprob": lp} for alt, lp in t.top]} for t in logprobs]


def _short_error(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "object"
        return f"{where}: {first.get('msg', 'invalid')}"
    return str(exc)[:200]
