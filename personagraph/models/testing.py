"""``test:<name>`` — deterministic chat models for offline tests. Never a default.

Replies depend only on the model name and the request (messages and response format). Structured calls get an object that
satisfies the requested JSON schema, with values drawn from a hash of the request, so scores vary across
items but repeat exactly across runs. Named behaviours cover failure paths; tests can register their own
scripts with :func:`register_script`.

Behaviours: ``test:refuser`` breaks persona, ``test:empty`` says nothing, ``test:broken`` returns
unparsable structured output, ``test:flaky`` fails every first attempt, ``test:down`` always fails,
``test:slow…`` answers after a delay, ``test:seeded`` samples: its free-text reply also depends on the
request's ``seed``, and breaks persona in about one reply in three; any other name answers normally.

Asked for ``top_logprobs=k``, every model returns deterministic log-probabilities in OpenAI's format: a
digit token is the most likely of a peaked distribution over its neighbouring digits (so a judge's
expected score sits near its integer score), any other token gets a hash-drawn probability.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import random
import re
from collections.abc import Callable
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, convert_to_openai_messages
from langchain_core.outputs import ChatGeneration, ChatResult

from personagraph.models.openai_http import ChatReply, parse_logprobs
from personagraph.models.retry import TransientModelError

Script = Callable[[list[dict[str, Any]], dict[str, Any] | None], str]
_scripts: dict[str, Script] = {}
_attempts: dict[str, int] = {}
SLOW_DELAY_S = 0.05  # test:slow* models answer after this delay (kill/resume tests)


def register_script(name: str, script: Script) -> None:
    """Makes ``test:<name>`` reply with ``script(messages, schema_or_None)``."""
    _scripts[name] = script


def _rng(messages: list[dict[str, Any]], extra: str = "") -> random.Random:
    blob = json.dumps(messages, sort_keys=True) + extra
    return random.Random(int(hashlib.sha256(blob.encode()).hexdigest()[:16], 16))


_POOL_LINE = re.compile(r"^\s*-\s+(?!\")([^:\n(]+?)\s*(?::|\(|$)", re.M)  # not the '- "key"' format lines


def _listed_names(messages: list[dict[str, Any]]) -> list[str]:
    text = "\n".join(str(m.get("content", "")) for m in messages)
    return [name.strip() for name in _POOL_LINE.findall(text) if name.strip()]


def value_for(schema: dict[str, Any], rng: random.Random, root: dict[str, Any], messages: list, key: str = "") -> Any:
    """A deterministic value satisfying a (pydantic-generated) JSON schema."""
    if "$ref" in schema:
        name = schema["$ref"].split("/")[-1]
        return value_for(root.get("$defs", {})[name], rng, root, messages, key)
    for union in ("anyOf", "oneOf"):
        if union in schema:
            options = [s for s in schema[union] if s.get("type") != "null"] or schema[union]
            return value_for(options[0], rng, root, messages, key)
    if "enum" in schema:
        return rng.choice(schema["enum"])
    if "const" in schema:
        return schema["const"]
    kind = schema.get("type", "object")
    if kind == "object":
        props = schema.get("properties", {})
        return {name: value_for(sub, rng, root, messages, name) for name, sub in props.items()}
    if kind == "array":
        low = schema.get("minItems", 1)
        high = schema.get("maxItems", max(low, 3))
        count = rng.randint(low, high)
        items = schema.get("items", {"type": "string"})
        if items.get("type") == "string" and key in {"environments", "names"}:
            names = _listed_names(messages)
            if names:
                return rng.sample(names, min(count, len(names)))
        return [value_for(items, rng, root, messages, key) for _ in range(count)]
    if kind == "integer":
        return rng.randint(int(schema.get("minimum", 1)), int(schema.get("maximum", 5)))
    if kind == "number":
        return round(rng.uniform(schema.get("minimum", 0.0), schema.get("maximum", 1.0)), 3)
    if kind == "boolean":
        return rng.random() < 0.5
    words = ["steady", "honest", "careful", "warm", "plain", "sure", "proud", "calm", "bright"]
    text = f"test {key or 'text'} {' '.join(rng.choice(words) for _ in range(4))}"
    return text[: schema.get("maxLength", len(text))]


def _free_text(messages: list[dict[str, Any]], rng: random.Random) -> str:
    last = str(messages[-1].get("content", "")) if messages else ""
    words = re.findall(r"[A-Za-z']+", last)[-6:]
    openers = ["Well,", "Honestly,", "You know,", "In my experience,", "Sure thing,"]
    return f"{rng.choice(openers)} when it comes to {' '.join(words) or 'that'}, I do it my own way. That is how I was raised."


def reply(name: str, messages: list[dict[str, Any]], response_format: dict[str, Any] | None,
          seed: int | None = None) -> str:
    """The reply of ``test:<name>`` to a request (see the module docstring for the behaviours)."""
    schema = None
    if response_format:
        schema = response_format.get("schema") or response_format.get("json_schema", {}).get("schema")
    if name in _scripts:
        return _scripts[name](messages, schema)
    rng = _rng(messages, name + (json.dumps(schema, sort_keys=True) if schema else ""))
    key = hashlib.sha256(json.dumps([name, messages, schema], sort_keys=True).encode()).hexdigest()
    if name == "flaky":
        _attempts[key] = _attempts.get(key, 0) + 1
        if _attempts[key] == 1:
            raise TransientModelError("test:flaky fails every first attempt", retry_after=0.01)
    if name == "down":
        raise TransientModelError("test:down never answers")
    if name == "empty":
        return ""
    if name == "seeded" and schema is None:
        rng = _rng(messages, f"{name}-{seed}")
        if rng.random() < 1 / 3:
            return "As an AI language model, I don't have personal experiences, but I can share general information."
        return _free_text(messages, rng)
    if name == "refuser" and schema is None:
        return "As an AI language model, I don't have personal experiences, but I can share general information."
    if name == "broken" and schema is not None:
        return "Sure! Here is my verdict: the answer is great {score: five"
    if schema is not None:
        return json.dumps(value_for(schema, rng, schema, messages))
    return _free_text(messages, rng)


_TOKEN = re.compile(r"\s*[A-Za-z]+|\s*\d|\s*[^\sA-Za-z\d]|\s+")  # digits one by one, as Qwen tokenizes them
_DIGIT_SPREAD = {0: 0.6, 1: 0.15, 2: 0.05}  # P(chosen digit ± distance)


def token_logprobs(text: str, top_logprobs: int) -> list[dict[str, Any]]:
    """Deterministic, plausible per-token logprobs of ``text`` (OpenAI's ``logprobs.content`` format)."""
    rng = random.Random(int(hashlib.sha256(text.encode()).hexdigest()[:16], 16))
    content = []
    for token in _TOKEN.findall(text):
        stripped = token.strip()
        if stripped.isdigit():
            value, prefix = int(stripped), token[: len(token) - 1]
            options = [(f"{prefix}{other}", p) for d, p in _DIGIT_SPREAD.items()
                       for other in sorted({value - d, value + d}) if 0 <= other <= 9]
        else:
            p = rng.uniform(0.5, 0.99)
            options = [(token, p)]
            options += [(f"{token}~{i}", (1 - p) / 2 ** (i + 1)) for i in range(top_logprobs)]
        options.sort(key=lambda option: -option[1])
        top = [{"token": t, "logprob": math.log(p)} for t, p in options[:top_logprobs]]
        chosen = next(p for t, p in options if t == token)
        content.append({"token": token, "logprob": math.log(chosen), "top_logprobs": top})
    return content


def scripted_completion(name: str, messages: list[dict[str, Any]], response_format: dict[str, Any] | None,
                        top_logprobs: int | None = None, seed: int | None = None) -> ChatReply:
    """The completion of ``test:<name>``: :func:`reply`, whitespace-word token counts, logprobs if asked."""
    text = reply(name, messages, response_format, seed)
    tokens_in = sum(len(str(m.get("content", "")).split()) for m in messages)
    logprobs = parse_logprobs({"content": token_logprobs(text, top_logprobs)}) if top_logprobs else None
    return ChatReply(text, tokens_in, len(text.split()), logprobs)


async def scripted_call(name: str, body: dict[str, Any]) -> ChatReply:
    """:func:`scripted_completion` of an OpenAI-style request body (``test:slow*`` answers after a delay)."""
    if name.startswith("slow"):
        await asyncio.sleep(SLOW_DELAY_S)
    return scripted_completion(name, body["messages"], body.get("response_format"), body.get("top_logprobs"),
                               body.get("seed"))


class ScriptedChatModel(BaseChatModel):
    """A LangChain chat model that answers with :func:`reply` (``test:<name>`` specs)."""

    model_name: str = "default"

    @property
    def _llm_type(self) -> str:
        return "personagraph-test"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        plain = convert_to_openai_messages(messages)
        top_logprobs = kwargs.get("top_logprobs")
        done = scripted_completion(self.model_name, plain, kwargs.get("response_format"), top_logprobs)
        metadata = {"logprobs": {"content": token_logprobs(done.text, top_logprobs)}} if top_logprobs else {}
        message = AIMessage(
            content=done.text,
            usage_metadata={
                "input_tokens": done.input_tokens,
                "output_tokens": done.output_tokens,
                "total_tokens": done.input_tokens + done.output_tokens,
            },
            response_metadata=metadata,
        )
        return ChatResult(generations=[ChatGeneration(message=message)])

    async def _agenerate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                         run_manager: Any = None, **kwargs: Any) -> ChatResult:
        if self.model_name.startswith("slow"):
            await asyncio.sleep(SLOW_DELAY_S)
        return self._generate(messages, stop, **kwargs)
