"""The fake OpenAI server, exercised through the official ``openai`` client."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Literal

import aiohttp
import jsonschema
import openai
import pytest
from openai import AsyncOpenAI
from pydantic import BaseModel, Field, ValidationError

from bench.fake_openai import FakeOpenAI, FakeOptions, ServerStats, body_key, completion_body, start_in_thread

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "fake_openai.py"


class Action(BaseModel):
    verb: str = Field(min_length=3, max_length=12)
    intensity: float = Field(gt=0, le=1)


class Evaluation(BaseModel):
    score: int = Field(ge=1, le=5)
    rationale: str = Field(min_length=40, max_length=80)
    mood: Literal["calm", "tense", "joyful"]
    in_character: bool
    actions: list[Action] = Field(min_length=2, max_length=4)
    tags: list[str] = Field(max_length=2)
    confidence: float | None = Field(default=None, ge=0, le=1)
    note: Action | None = None
    per_rubric: dict[str, int]
    offset: int = Field(gt=-3, lt=0)


class Node(BaseModel):
    name: str
    children: list[Node] = []


class Verdict(BaseModel):
    score: int = Field(ge=1, le=5)
    reason: str


ENVIRONMENT_PROMPT = """Choose the environments where this persona would be tested.
Persona: {persona}
Available environments:
- Coffee Shop: a busy cafe downtown
- City Library (quiet)
- Hiking Trail: a steep mountain path
- Open-Plan Office: desks and meetings
- Farmers Market (outdoor)
- Hospital Waiting Room: anxious families
Answer with JSON."""
POOL = {
    "Coffee Shop",
    "City Library",
    "Hiking Trail",
    "Open-Plan Office",
    "Farmers Market",
    "Hospital Waiting Room",
}


def schema_format(model: type[BaseModel]) -> dict[str, Any]:
    """An OpenAI ``response_format`` asking for ``model``'s (non-strict) JSON schema."""
    return {
        "type": "json_schema",
        "json_schema": {"name": model.__name__, "schema": model.model_json_schema()},
    }


def user(text: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": "You are a persona."}, {"role": "user", "content": text}]


@pytest.fixture
async def server() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as running:
        yield running


@pytest.fixture
async def client(server: FakeOpenAI) -> AsyncIterator[AsyncOpenAI]:
    async with AsyncOpenAI(base_url=server.base_url, api_key="test", max_retries=0, timeout=10) as api:
        yield api


def client_for(server: FakeOpenAI, *, timeout: float = 10, max_retries: int = 0) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=server.base_url, api_key="test", max_retries=max_retries, timeout=timeout)


# --- replies --------------------------------------------------------------------------------------


async def test_free_text_is_deterministic_and_echoes_the_user(client: AsyncOpenAI) -> None:
    messages = user("Tell me about your garden and the neighbours who visit it")
    first = await client.chat.completions.create(model="m", messages=messages)
    second = await client.chat.completions.create(model="m", messages=messages, temperature=1.5)
    other = await client.chat.completions.create(model="m", messages=user("What music calms you down?"))

    content = first.choices[0].message.content
    assert content == second.choices[0].message.content
    assert first.id == second.id
    assert content != other.choices[0].message.content
    assert 2 <= content.count(".") <= 3
    words = set(re.findall(r"[A-Za-z']+", content))
    assert words & {"garden", "neighbours", "visit"}  # echoes content words...
    assert not words & {"Tell", "your"}  # ...not stopwords
    prompt_words = sum(len(message["content"].split()) for message in messages)
    assert first.usage.prompt_tokens == prompt_words
    assert first.usage.completion_tokens == len(content.split())
    assert first.usage.total_tokens == first.usage.prompt_tokens + first.usage.completion_tokens


async def test_replies_do_not_depend_on_server_state() -> None:
    messages = user("Where did you grow up?")
    contents = []
    for seed in (0, 1):
        async with FakeOpenAI(seed=seed) as server, client_for(server) as api:
            reply = await api.chat.completions.create(model="m", messages=messages)
            contents.append(reply.choices[0].message.content)
    assert contents[0] == contents[1]


async def test_structured_replies_validate_against_the_schema(client: AsyncOpenAI) -> None:
    response_format = schema_format(Evaluation)
    seen_scores = set()
    for i in range(25):
        reply = await client.chat.completions.create(
            model="m", messages=user(f"Evaluate response number {i}"), response_format=response_format
        )
        payload = json.loads(reply.choices[0].message.content)
        jsonschema.validate(payload, Evaluation.model_json_schema())
        seen_scores.add(Evaluation.model_validate(payload).score)
    assert len(seen_scores) > 1  # replies vary with the prompt


async def test_structured_reply_is_deterministic(client: AsyncOpenAI) -> None:
    kwargs: dict[str, Any] = {
        "model": "m",
        "messages": user("Evaluate."),
        "response_format": schema_format(Evaluation),
    }
    first = await client.chat.completions.create(**kwargs)
    second = await client.chat.completions.create(**kwargs)
    assert first.choices[0].message.content == second.choices[0].message.content


async def test_recursive_schema_terminates_and_validates(client: AsyncOpenAI) -> None:
    for i in range(5):
        reply = await client.chat.completions.create(
            model="m", messages=user(f"tree {i}"), response_format=schema_format(Node)
        )
        payload = json.loads(reply.choices[0].message.content)
        jsonschema.validate(payload, Node.model_json_schema())
        Node.model_validate(payload)


async def test_openai_parse_with_strict_schema(client: AsyncOpenAI) -> None:
    completion = await client.chat.completions.parse(
        model="m", messages=user("Judge this answer."), response_format=Verdict
    )
    verdict = completion.choices[0].message.parsed
    assert isinstance(verdict, Verdict) and 1 <= verdict.score <= 5


async def test_json_object_with_and_without_schema(client: AsyncOpenAI) -> None:
    with_schema = await client.chat.completions.create(
        model="m",
        messages=user("Judge."),
        response_format={"type": "json_object"},
        extra_body={"response_format": {"type": "json_object", "schema": Verdict.model_json_schema()}},
    )
    Verdict.model_validate_json(with_schema.choices[0].message.content)
    bare = await client.chat.completions.create(
        model="m", messages=user("Reply in JSON please"), response_format={"type": "json_object"}
    )
    assert isinstance(json.loads(bare.choices[0].message.content), dict)


async def test_environments_come_from_the_prompt_pool(client: AsyncOpenAI) -> None:
    class Bounded(BaseModel):
        environments: list[str] = Field(min_length=2, max_length=4)
        rationale: str

    class Unbounded(BaseModel):
        environments: list[str]

    counts = set()
    for persona in ("a retired teacher", "a nurse on night shifts", "a teenage skater", "a chef", "a pilot"):
        messages = user(ENVIRONMENT_PROMPT.format(persona=persona))
        bounded = await client.chat.completions.create(
            model="m", messages=messages, response_format=schema_format(Bounded)
        )
        chosen = Bounded.model_validate_json(bounded.choices[0].message.content).environments
        assert set(chosen) <= POOL and len(set(chosen)) == len(chosen)
        counts.add(len(chosen))

        unbounded = await client.chat.completions.create(
            model="m", messages=messages, response_format=schema_format(Unbounded)
        )
        defaults = Unbounded.model_validate_json(unbounded.choices[0].message.content).environments
        assert len(defaults) == 3 and set(defaults) <= POOL and len(set(defaults)) == 3
    assert counts <= {2, 3, 4}


async def test_models_endpoint(client: AsyncOpenAI) -> None:
    models = await client.models.list()
    assert [model.id for model in models.data] == ["fake-model"]


async def test_streaming_is_rejected(client: AsyncOpenAI) -> None:
    with pytest.raises(openai.BadRequestError):
        await client.chat.completions.create(model="m", messages=user("hi"), stream=True)


# --- latency and concurrency ----------------------------------------------------------------------


async def test_delay_and_concurrency_counters() -> None:
    async with FakeOpenAI(delay=0.3) as server, client_for(server) as api:
        started = time.perf_counter()
        await api.chat.completions.create(model="m", messages=user("one"))
        assert time.perf_counter() - started >= 0.3

        await asyncio.gather(
            *(api.chat.completions.create(model="m", messages=user(f"call {i}")) for i in range(5))
        )
        stats = server.stats()
        assert stats.max_in_flight == 5 and stats.in_flight == 0  # served concurrently, not one by one
        assert stats.requests_total == stats.completions == 6


# --- faults ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "error"),
    [
        ("429", openai.RateLimitError),
        ("500", openai.InternalServerError),
        ("timeout", openai.APITimeoutError),
        ("drop", openai.APIConnectionError),
    ],
)
async def test_each_fault_at_rate_one(kind: str, error: type[Exception]) -> None:
    async with FakeOpenAI(**{f"rate_{kind}": 1.0}, timeout_sleep=5) as server:
        async with client_for(server, timeout=0.5) as api:
            with pytest.raises(error) as caught:
                await api.chat.completions.create(model="m", messages=user("hello"))
        if kind == "drop":
            assert not isinstance(caught.value, openai.APITimeoutError)  # dropped at once, not timed out
        stats = server.stats()
        assert stats.faults[kind] == 1 and sum(stats.faults.values()) == 1
        assert stats.completions == 0


async def test_429_carries_retry_after() -> None:
    for configured, header in ((1.0, "1"), (2.5, "2.5")):
        async with FakeOpenAI(rate_429=1.0, retry_after=configured) as server, client_for(server) as api:
            with pytest.raises(openai.RateLimitError) as caught:
                await api.chat.completions.create(model="m", messages=user("hello"))
            assert caught.value.response.headers["retry-after"] == header


async def test_malformed_applies_to_structured_calls_only() -> None:
    async with FakeOpenAI(rate_malformed=1.0) as server, client_for(server) as api:
        structured = await api.chat.completions.create(
            model="m", messages=user("Judge."), response_format=schema_format(Verdict)
        )
        with pytest.raises(json.JSONDecodeError):
            json.loads(structured.choices[0].message.content)
        with pytest.raises(ValidationError):
            await api.chat.completions.parse(model="m", messages=user("Judge."), response_format=Verdict)

        text = await api.chat.completions.create(model="m", messages=user("Say something"))
        assert text.choices[0].message.content
        assert server.stats().faults["malformed"] == 2


async def test_retried_identical_request_succeeds() -> None:
    async with FakeOpenAI(rate_500=0.5, seed=3) as server, client_for(server) as api:
        # Find a request whose first attempt fails, then retry it unchanged until it succeeds.
        for i in range(40):
            messages = user(f"question {i}")
            try:
                await api.chat.completions.create(model="m", messages=messages)
            except openai.InternalServerError:
                break
        else:
            pytest.fail("no first attempt failed at rate 0.5")

        outcomes = ["500"]
        while outcomes[-1] == "500" and len(outcomes) < 40:
            try:
                await api.chat.completions.create(model="m", messages=messages)
                outcomes.append("ok")
            except openai.InternalServerError:
                outcomes.append("500")
        assert outcomes[-1] == "ok"
        key = body_key({"model": "m", "messages": messages})
        assert server.stats().attempts[key] == len(outcomes)

        # After a reset the same body sees the same fault sequence.
        server.reset()
        replay = []
        for _ in outcomes:
            try:
                await api.chat.completions.create(model="m", messages=messages)
                replay.append("ok")
            except openai.InternalServerError:
                replay.append("500")
        assert replay == outcomes


async def test_client_retries_get_through_rate_limits() -> None:
    async with FakeOpenAI(rate_429=0.5, retry_after=0.01) as server:
        async with client_for(server, max_retries=10) as api:
            replies = await asyncio.gather(
                *(api.chat.completions.create(model="m", messages=user(f"ask {i}")) for i in range(12))
            )
        assert all(reply.choices[0].message.content for reply in replies)
        stats = server.stats()
        assert stats.completions == 12
        assert stats.faults["429"] > 0
        assert stats.requests_total == 12 + stats.faults["429"]


def test_rates_must_fit_in_one() -> None:
    with pytest.raises(ValidationError):
        FakeOptions(rate_429=0.7, rate_500=0.5)
    with pytest.raises(ValidationError):
        FakeOptions(rate_drop=1.5)


# --- stats endpoints ------------------------------------------------------------------------------


async def test_stats_endpoints(server: FakeOpenAI, client: AsyncOpenAI) -> None:
    await client.chat.completions.create(model="m", messages=user("hello"))
    await client.chat.completions.create(model="m", messages=user("hello"))
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{server.url}/stats") as response:
            stats = ServerStats.model_validate(await response.json())
        assert stats.requests_total == 2 and stats.completions == 2
        assert list(stats.attempts.values()) == [2]
        assert stats.max_in_flight == 1

        async with http.post(f"{server.url}/stats/reset") as response:
            assert response.status == 200
        async with http.get(f"{server.url}/stats") as response:
            assert ServerStats.model_validate(await response.json()) == ServerStats()


# --- other ways to run it -------------------------------------------------------------------------


def test_start_in_thread_serves_sync_clients() -> None:
    with start_in_thread(delay=0.01) as handle:
        api = openai.OpenAI(base_url=handle.base_url, api_key="test", max_retries=0, timeout=5)
        reply = api.chat.completions.create(model="m", messages=user("hello from a thread"))
        assert reply.choices[0].message.content
        assert handle.stats().completions == 1
        handle.reset()
        assert handle.stats().completions == 0
    with pytest.raises(openai.APIConnectionError):
        api.chat.completions.create(model="m", messages=user("anyone there?"))
    handle.stop()  # idempotent


def test_command_line_announces_port_and_serves() -> None:
    process = subprocess.Popen(
        [sys.executable, str(SCRIPT), "--port", "0", "--rate-429", "1", "--retry-after", "3"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline().strip()
        match = re.fullmatch(r"listening on (http://127\.0\.0\.1:(\d+)/v1)", line)
        assert match, line
        api = openai.OpenAI(base_url=match.group(1), api_key="test", max_retries=0, timeout=5)
        with pytest.raises(openai.RateLimitError) as caught:
            api.chat.completions.create(model="m", messages=user("hi"))
        assert caught.value.response.headers["retry-after"] == "3"
    finally:
        process.terminate()
        assert process.wait(timeout=10) == 0


async def test_an_outage_fails_every_request_until_it_ends() -> None:
    async with FakeOpenAI(outage=0.6, outage_status=503) as server, client_for(server) as api:
        for _ in range(3):
            with pytest.raises(openai.InternalServerError) as caught:
                await api.with_options(max_retries=0).chat.completions.create(model="m", messages=user("hi"))
            assert caught.value.status_code == 503
        await asyncio.sleep(0.7)
        reply = await api.chat.completions.create(model="m", messages=user("hi"))
        assert reply.choices[0].message.content
        stats = server.stats()
        assert stats.outage_failures == 3 and stats.completions == 1 and sum(stats.faults.values()) == 0
        server.start_outage(10)  # a second outage, started on demand, with a status clients do not retry
        server.options.outage_status = 401
        with pytest.raises(openai.AuthenticationError):
            await api.chat.completions.create(model="m", messages=user("hi"))
        server.start_outage(0)
        assert (await api.chat.completions.create(model="m", messages=user("hi"))).choices


def test_outage_flags_on_the_command_line() -> None:
    from bench.fake_openai import parse_args

    options = parse_args(["--outage", "5", "--outage-status", "401"])
    assert (options.outage, options.outage_status) == (5.0, 401)


def test_full_lists_fill_bounded_arrays_to_max_items() -> None:
    schema = {"type": "object", "properties": {"questions": {"type": "array", "items": {"type": "string"},
                                                             "maxItems": 4}}, "required": ["questions"]}
    response_format = {"type": "json_schema", "json_schema": {"name": "Q", "schema": schema}}

    def count(i: int, full: bool) -> int:
        messages = [{"role": "user", "content": f"q{i}"}]
        body = {"model": "m", "messages": messages, "response_format": response_format}
        reply = completion_body(body, "m", full_lists=full)
        return len(json.loads(reply["choices"][0]["message"]["content"])["questions"])

    counts = {full: {count(i, full) for i in range(12)} for full in (False, True)}
    assert counts[True] == {4}
    assert len(counts[False]) > 1  # the default draws a count within the bounds


async def test_jitter_spreads_delays_the_same_way_for_the_same_request() -> None:
    """Two servers (two versions of a graph under test) make the same request wait alike; requests differ
    within delay × (1 ± jitter)."""
    first, second = FakeOpenAI(delay=1.0, jitter=0.5), FakeOpenAI(delay=1.0, jitter=0.5)
    delays = [first._delay(f"key{i}", 1) for i in range(200)]
    assert delays == [second._delay(f"key{i}", 1) for i in range(200)]
    assert all(0.5 <= d <= 1.5 for d in delays) and max(delays) - min(delays) > 0.8
    assert first._delay("key0", 2) != first._delay("key0", 1)  # a retry draws again
    assert FakeOpenAI(delay=1.0)._delay("key0", 1) == 1.0
