"""The one model layer: spec → route → cached, limited, retried, validated (and traced) calls per role."""

from personagraph.models.client import (
    Completion,
    Meter,
    ModelClient,
    Structured,
    cache_key,
    extract_json,
    parse_structured,
)
from personagraph.models.factory import Route, make_chat_model, resolve_route
from personagraph.models.providers import PROVIDER_RULES, PROVIDERS, ProviderRules
from personagraph.models.retry import RetryPolicy, TransientModelError
from personagraph.models.settings import Endpoint, ModelSettings, parse_endpoint
from personagraph.models.spec import (
    DEFAULT_JUDGE,
    DEFAULT_MODEL,
    LOCAL_MODELS,
    LocalModel,
    ModelSpec,
    parse_spec,
)

__all__ = [
    "DEFAULT_JUDGE",
    "DEFAULT_MODEL",
    "LOCAL_MODELS",
    "PROVIDERS",
    "PROVIDER_RULES",
    "Completion",
    "Endpoint",
    "LocalModel",
    "Meter",
    "ModelClient",
    "ModelSettings",
    "ModelSpec",
    "ProviderRules",
    "RetryPolicy",
    "Route",
    "Structured",
    "TransientModelError",
    "cache_key",
    "extract_json",
    "make_chat_model",
    "parse_endpoint",
    "parse_spec",
    "parse_structured",
    "resolve_route",
]
