"""The one table of provider rules: what each provider needs and how its calls go.

Everything else in the model layer reads these rules instead of branching on the provider's name:
the spec parser (which providers take a named endpoint), the factory (where the endpoint and the key
come from), and the client (transport, structured-output mode, concurrency, logprobs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Provider = Literal["openai", "local", "test"]
# http: an OpenAI-compatible endpoint; engine: the embedded model's own llama.cpp server (its port is
# known at the first call); scripted: the deterministic test models, in this process.
Transport = Literal["http", "engine", "scripted"]
Mode = Literal["json_schema", "json_object"]


@dataclass(frozen=True)
class ProviderRules:
    """How one provider is reached and what it supports."""

    transport: Transport
    endpoints: bool  # takes --base-url, --endpoint and ``provider@NAME:model`` specs
    url_env: str | None = None  # the environment variable of its default endpoint …
    default_url: str = ""  # … and the endpoint when neither flags, settings nor the environment name one
    key_env: str | None = None  # the environment variable of the default endpoint's key
    hosted_structured: Mode = "json_object"  # what structured="auto" means on default_url …
    self_hosted_structured: Mode = "json_object"  # … and on any other endpoint (vLLM, Ollama, llama.cpp)
    logprobs: bool = True  # returns top_logprobs when asked
    engine_slots: bool = (
        False  # at most as many calls at once as the engine has slots (else settings.concurrency)
    )

    def hosted(self, url: str) -> bool:
        """True for the provider's own service, which limits each model apart (OpenAI's API)."""
        return bool(self.default_url) and url.rstrip("/") == self.default_url


PROVIDER_RULES: dict[Provider, ProviderRules] = {
    "openai": ProviderRules(
        transport="http",
        endpoints=True,
        url_env="OPENAI_BASE_URL",
        default_url="https://api.openai.com/v1",
        key_env="OPENAI_API_KEY",
        hosted_structured="json_schema",
    ),
    "local": ProviderRules(transport="engine", endpoints=False, engine_slots=True),
    "test": ProviderRules(transport="scripted", endpoints=False),
}
PROVIDERS: tuple[Provider, ...] = tuple(PROVIDER_RULES)
