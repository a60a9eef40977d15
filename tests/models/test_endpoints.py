"""Named endpoints and the one place endpoints and keys are resolved (models/factory.resolve_route)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.fake_openai import start_in_thread
from personagraph.api import aevaluate
from personagraph.errors import PersonagraphError
from personagraph.models import (
    Endpoint,
    ModelClient,
    ModelSettings,
    parse_endpoint,
    parse_spec,
    resolve_route,
)
from personagraph.models.spec import names_a_provider
from personagraph.runs.plugins import is_plugin_path
from personagraph.store import RunStore

MESSAGES = [{"role": "user", "content": "Hello there."}]


def test_endpoint_option_parses_name_url_key_variable_and_concurrency() -> None:
    assert parse_endpoint("vllm=http://gpu:8000/v1,key-env=VLLM_KEY,concurrency=16") == Endpoint(
        name="vllm", url="http://gpu:8000/v1", key_env="VLLM_KEY", concurrency=16
    )
    assert parse_endpoint("oai=https://api.openai.com/v1") == Endpoint(
        name="oai", url="https://api.openai.com/v1"
    )


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("vllm", "expected NAME=URL"),
        ("=http://x/v1", "expected NAME=URL"),
        ("vllm=gpu:8000", "url"),
        ("vllm=http://x/v1,key=sk-123", "unknown option 'key=sk-123'"),
        ("vllm=http://x/v1,concurrency=0", "concurrency"),
    ],
)
def test_bad_endpoint_option_is_one_line_naming_it(text: str, problem: str) -> None:
    with pytest.raises(PersonagraphError, match=problem) as info:
        parse_endpoint(text)
    assert text in str(info.value) and "\n" not in str(info.value)


def test_endpoint_names_are_unique() -> None:
    with pytest.raises(PersonagraphError, match="defined twice"):
        ModelSettings(endpoints=["a=http://x/v1", "a=http://y/v1"])


def test_shared_settings_divide_every_limit() -> None:
    settings = ModelSettings(concurrency=32, endpoints=["a=http://a/v1,concurrency=8", "b=http://b/v1"])
    shared = settings.shared_by(3)
    assert shared.concurrency == 10 and [e.concurrency for e in shared.endpoints] == [2, None]
    assert settings.shared_by(100).endpoints[0].concurrency == 1


def test_specs_name_endpoints_only_where_the_provider_takes_them() -> None:
    spec = parse_spec("openai@vllm:Qwen/Qwen2.5-7B-Instruct")
    assert (spec.provider, spec.endpoint, spec.name) == ("openai", "vllm", "Qwen/Qwen2.5-7B-Instruct")
    assert str(spec) == "openai@vllm:Qwen/Qwen2.5-7B-Instruct"
    for bad in ("local@x:qwen2.5-coder-0.5b", "test@x:judge", "openai@:gpt-4o"):
        with pytest.raises(PersonagraphError, match="ENDPOINT"):
            parse_spec(bad)
    assert names_a_provider("openai@vllm:m") and not is_plugin_path("openai@vllm:m")
    assert is_plugin_path("examples.function_agent:agent")


def test_route_resolves_flags_then_settings_then_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    monkeypatch.setenv("VLLM_KEY", "sk-vllm")
    settings = ModelSettings(
        concurrency=8,
        endpoints=["vllm=http://gpu:8000/v1,key-env=VLLM_KEY,concurrency=3", "ollama=http://box:11434/v1"],
    )
    hosted = resolve_route(parse_spec("openai:gpt-4o"), settings)
    assert (hosted.url, hosted.api_key, hosted.cache_url, hosted.structured) == (
        "https://api.openai.com/v1",
        "sk-env",
        "",
        "json_schema",
    )
    vllm = resolve_route(parse_spec("openai@vllm:qwen"), settings)
    assert (vllm.url, vllm.api_key, vllm.concurrency, vllm.structured) == (
        "http://gpu:8000/v1",
        "sk-vllm",
        3,
        "json_object",
    )
    ollama = resolve_route(parse_spec("openai@ollama:llama3"), settings)
    assert (ollama.api_key, ollama.concurrency) == ("", 8)  # no key-env: the OpenAI key is never sent there
    # every model of a self-hosted endpoint shares its limit; a hosted service limits each model
    assert vllm.limit_key == resolve_route(parse_spec("openai@vllm:other"), settings).limit_key
    assert hosted.limit_key != resolve_route(parse_spec("openai:gpt-4o-mini"), settings).limit_key
    flagged = resolve_route(
        parse_spec("openai:m"), settings.model_copy(update={"base_url": "http://flag/v1"})
    )
    assert flagged.url == flagged.cache_url == "http://flag/v1"
    with pytest.raises(PersonagraphError, match="no endpoint named 'gpu' \\(defined: vllm, ollama\\)"):
        resolve_route(parse_spec("openai@gpu:m"), settings)
    monkeypatch.delenv("VLLM_KEY")
    with pytest.raises(PersonagraphError, match="\\$VLLM_KEY is not set"):
        resolve_route(parse_spec("openai@vllm:qwen"), settings)
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(PersonagraphError, match="no API key"):
        resolve_route(parse_spec("openai:gpt-4o"), ModelSettings())


async def test_openai_base_url_alone_is_part_of_the_cache_key(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bug this fixes: with only OPENAI_BASE_URL set, two endpoints shared cache entries."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with start_in_thread() as first, start_in_thread() as second:
        for server in (first, second):
            monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
            client = ModelClient.create("openai:m", "judge", store=RunStore(run_dir))
            reply = await client.complete(MESSAGES)
            assert reply.ok and not reply.cached
        assert first.stats().completions == second.stats().completions == 1
        again = await ModelClient.create("openai:m", "judge", store=RunStore(run_dir)).complete(MESSAGES)
        assert again.cached and second.stats().completions == 1


async def test_one_eval_sends_each_role_to_its_own_endpoint_within_its_limit(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("JUDGE_SERVER_KEY", "sk-judge-secret-4242")
    with start_in_thread(delay=0.02) as agents, start_in_thread(delay=0.02) as judges:
        summary = await aevaluate(
            ["A 70-year-old retired cowboy from Texas", "A pediatric nurse from Ohio"],
            models=["openai@agents:agent-model"],
            judges=["openai@judges:judge-model"],
            endpoints=[
                f"agents={agents.base_url},concurrency=2",
                f"judges={judges.base_url},key-env=JUDGE_SERVER_KEY,concurrency=3",
            ],
            run_dir=run_dir,
            environments=2,
            questions_per_task=2,
            concurrency=16,
        )
        assert summary.exit_code == 0
        assert "openai@agents:agent-model" in summary.models
        by_role: dict[str, set[str]] = {}
        counts = {"agent": 0, "judge": 0}
        for row in RunStore(run_dir).call_stats():
            by_role.setdefault(row["role"], set()).add(row["model"])
            counts["agent" if row["model"] == "openai@agents:agent-model" else "judge"] += row["calls"]
        assert by_role.pop("persona") == {"openai@agents:agent-model"}
        assert set().union(*by_role.values()) == {"openai@judges:judge-model"}  # judges and generator roles
        agent_stats, judge_stats = agents.stats(), judges.stats()
        assert (
            agent_stats.completions == counts["agent"] > 0 and judge_stats.completions == counts["judge"] > 0
        )
        assert 1 < agent_stats.max_in_flight <= 2 and 1 < judge_stats.max_in_flight <= 3
    stored = b"".join(p.read_bytes() for p in run_dir.rglob("*") if p.is_file())
    assert b"sk-judge-secret-4242" not in stored
