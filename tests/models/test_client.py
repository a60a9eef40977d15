"""The model layer: cache keys, the response cache, retries, structured-output validation."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import openai
import pytest
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import BaseModel, Field

from personagraph.models import (
    Meter,
    ModelClient,
    ModelSettings,
    RetryPolicy,
    TransientModelError,
    cache_key,
    extract_json,
    parse_spec,
    resolve_route,
)
from personagraph.models.retry import classify
from personagraph.models.testing import register_script
from personagraph.schemas import JudgeReply
from personagraph.store import RunStore

MESSAGES = [{"role": "user", "content": "Rate this."}]


class FailingModel(BaseChatModel):
    """Fails with the given errors in order, then answers ``reply``."""

    errors: list[Any]
    reply: str = "fine"
    attempts: int = 0

    @property
    def _llm_type(self) -> str:
        return "failing"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any) -> ChatResult:
        raise NotImplementedError

    async def _agenerate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                         **kw: Any) -> ChatResult:
        self.attempts += 1
        if self.errors:
            raise self.errors.pop(0)
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=self.reply))])


def client_over(model: BaseChatModel, store: RunStore | None = None, attempts: int = 4) -> ModelClient:
    spec, settings = parse_spec("openai:fake"), ModelSettings(base_url="http://fake/v1")
    return ModelClient(spec, "judge", settings, resolve_route(spec, settings), chat_model=model, store=store,
                       retry=RetryPolicy(attempts=attempts, base_s=0.001, max_s=0.002))


def test_cache_key_covers_model_endpoint_messages_and_params() -> None:
    base = cache_key("openai:a", "", MESSAGES, {"temperature": 0})
    assert base == cache_key("openai:a", "", [dict(m) for m in MESSAGES], {"temperature": 0})
    assert base != cache_key("openai:b", "", MESSAGES, {"temperature": 0})
    assert base != cache_key("openai:a", "http://other/v1", MESSAGES, {"temperature": 0})
    assert base != cache_key("openai:a", "", [{"role": "user", "content": "Rate that."}], {"temperature": 0})
    assert base != cache_key("openai:a", "", MESSAGES, {"temperature": 0.7})


async def test_cached_call_is_not_sent_again(run_dir) -> None:
    store = RunStore(run_dir)
    first = ModelClient.create("test:any", "persona", store=store)
    reply = await first.complete(MESSAGES)
    assert reply.ok and not reply.cached and first.meter.total_calls == 1
    second = ModelClient.create("test:any", "persona", store=RunStore(run_dir))
    again = await second.complete(MESSAGES)
    assert again.cached and again.text == reply.text
    assert second.meter.total_calls == 0 and second.meter.total_cache_hits == 1


async def test_a_reply_that_used_its_whole_token_budget_is_marked_sent_and_from_the_cache(run_dir) -> None:
    register_script("five-words", lambda messages, schema: "one two three four five")  # 5 tokens here
    for limit, expected in ((5, True), (6, False)):
        sent = await ModelClient.create("test:five-words", "persona", store=RunStore(run_dir),
                                        max_tokens=limit).complete(MESSAGES)
        cached = await ModelClient.create("test:five-words", "persona", store=RunStore(run_dir),
                                          max_tokens=limit).complete(MESSAGES)
        assert (sent.cached, cached.cached) == (False, True)
        assert sent.at_token_limit is cached.at_token_limit is expected


async def test_transient_errors_are_retried_and_retry_after_is_honoured(monkeypatch) -> None:
    waits: list[float] = []
    real_sleep = asyncio.sleep

    async def fake_sleep(seconds: float) -> None:
        waits.append(seconds)
        await real_sleep(0)

    monkeypatch.setattr(asyncio, "sleep", fake_sleep)
    model = FailingModel(errors=[TransientModelError("429", retry_after=1.5), ConnectionError("reset")])
    reply = await client_over(model).complete(MESSAGES)
    assert reply.ok and reply.text == "fine"
    assert model.attempts == 3
    assert waits[0] >= 1.5  # the server's Retry-After wins over a shorter backoff


async def test_exhausted_retries_fail_without_pretending_to_answer() -> None:
    model = FailingModel(errors=[TransientModelError("503")] * 5)
    reply = await client_over(model, attempts=3).complete(MESSAGES)
    assert not reply.ok and reply.text == ""
    assert "gave up after 3 attempts" in (reply.error or "")
    assert model.attempts == 3


async def test_permanent_errors_are_not_retried(run_dir) -> None:
    store = RunStore(run_dir)
    model = FailingModel(errors=[ValueError("bad request")])
    reply = await client_over(model, store).complete(MESSAGES)
    assert not reply.ok and model.attempts == 1 and "bad request" in (reply.error or "")
    assert store.call_stats() == []  # failures are never cached


def test_openai_errors_are_classified() -> None:
    request = httpx.Request("POST", "http://x/v1/chat/completions")
    limited = openai.RateLimitError(
        "slow down", response=httpx.Response(429, headers={"retry-after": "2"}, request=request), body=None
    )
    assert classify(limited).retry_after == 2.0
    server = openai.InternalServerError("boom", response=httpx.Response(502, request=request), body=None)
    assert classify(server) is not None
    assert classify(openai.APITimeoutError(request=request)) is not None
    auth = openai.AuthenticationError("no", response=httpx.Response(401, request=request), body=None)
    assert classify(auth) is None


async def test_structured_output_validates(run_dir) -> None:
    reply = await ModelClient.create("test:judge", "judge", store=RunStore(run_dir)).structured(MESSAGES, JudgeReply)
    assert reply.ok and isinstance(reply.value, JudgeReply) and 1 <= reply.value.score <= 5


async def test_unparsable_structured_output_is_failed_with_raw_text() -> None:
    client = ModelClient.create("test:broken", "judge")
    reply = await client.structured(MESSAGES, JudgeReply)
    assert not reply.ok and reply.value is None
    assert "{score: five" in reply.raw and "invalid structured output" in (reply.error or "")
    assert client.meter.total_calls == 2  # the first reply plus one retry with a format reminder


async def test_out_of_range_score_fails_validation_then_recovers_on_retry() -> None:
    model = FailingModel(errors=[], reply='{"rationale": "ok", "score": 9}')
    client = client_over(model)
    replies = iter(['{"rationale": "too high", "score": 9}', '```json\n{"rationale": "ok", "score": 4}\n```'])

    async def scripted(messages: Any, **kwargs: Any) -> AIMessage:
        return AIMessage(content=next(replies))

    client.chat_model = type("Scripted", (), {"ainvoke": staticmethod(scripted)})()
    reply = await client.structured(MESSAGES, JudgeReply)
    assert reply.ok and reply.value.score == 4


class Pick(BaseModel):
    names: list[str] = Field(description="names")


def test_extract_json_tolerates_fences_and_prose() -> None:
    assert extract_json('Sure!\n```json\n{"a": 1}\n```') == {"a": 1}
    assert extract_json('Here: {"a": {"b": 2}} done') == {"a": {"b": 2}}
    with pytest.raises(ValueError):
        extract_json("no json here")


async def test_meter_counts_tokens_per_role() -> None:
    meter = Meter()
    await ModelClient.create("test:x", "question_gen", meter=meter).complete(MESSAGES)
    await ModelClient.create("test:x", "judge", meter=meter).structured(MESSAGES, JudgeReply)
    roles = meter.as_dict()
    assert roles["question_gen"]["calls"] == 1 and roles["judge"]["calls"] == 1
    assert roles["judge"]["input_tokens"] > 0 and roles["judge"]["output_tokens"] > 0


async def test_logprobs_are_returned_cached_and_part_of_the_key(run_dir) -> None:
    store = RunStore(run_dir)
    client = ModelClient.create("test:any", "judge", store=store)
    plain = await client.structured(MESSAGES, JudgeReply)
    asked = await client.structured(MESSAGES, JudgeReply, top_logprobs=3)
    assert plain.logprobs is None and not asked.cached  # a different cache key: sent, not a cache hit
    assert asked.logprobs is not None and "".join(t.token for t in asked.logprobs) == asked.raw
    assert all(len(t.top) == 3 and t.top[0][1] >= t.top[-1][1] for t in asked.logprobs)
    again = await ModelClient.create("test:any", "judge", store=RunStore(run_dir)).structured(
        MESSAGES, JudgeReply, top_logprobs=3
    )
    assert again.cached and again.logprobs == asked.logprobs


async def test_providers_without_logprobs_give_none() -> None:
    reply = await client_over(FailingModel(errors=[])).complete(MESSAGES, top_logprobs=5)
    assert reply.ok and reply.text == "fine" and reply.logprobs is None
