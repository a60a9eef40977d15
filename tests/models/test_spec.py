import pytest

from personagraph.errors import PersonagraphError
from personagraph.models import LOCAL_MODELS, parse_spec


@pytest.mark.parametrize(
    ("text", "provider", "name"),
    [
        ("openai:gpt-4o-mini", "openai", "gpt-4o-mini"),
        ("local:qwen2.5-coder-0.5b", "local", "qwen2.5-coder-0.5b"),
        ("test:judge", "test", "judge"),
        ("openai:org/model:tag", "openai", "org/model:tag"),
    ],
)
def test_parse_spec(text: str, provider: str, name: str) -> None:
    spec = parse_spec(text)
    assert (spec.provider, spec.name) == (provider, name)
    assert str(spec) == text


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("gpt-4o", "expected PROVIDER:NAME"),
        ("openai:", "expected PROVIDER:NAME"),
        ("azure:gpt-4o", "unknown provider 'azure'"),
        ("local:llama-70b", "unknown local model"),
    ],
)
def test_bad_specs_name_the_problem(text: str, message: str) -> None:
    with pytest.raises(PersonagraphError, match=message) as info:
        parse_spec(text)
    assert text in str(info.value) or text.split(":")[0] in str(info.value)
    assert "\n" not in str(info.value)


def test_local_catalogue_matches_the_measured_weights() -> None:
    assert LOCAL_MODELS["qwen2.5-coder-1.5b"].size == 1_117_320_768
    assert len(LOCAL_MODELS["qwen2.5-coder-1.5b"].packages) == 22
    assert LOCAL_MODELS["qwen2.5-coder-0.5b"].size == 491_400_064
    assert len(LOCAL_MODELS["qwen2.5-coder-0.5b"].packages) == 6
