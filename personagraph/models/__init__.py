"""The one model layer: spec → chat model; cached, limited, retried, validated calls per role."""

from personagraph.models.client import Completion, Meter, ModelClient, Structured, cache_key, extract_json
from personagraph.models.factory import make_chat_model
from personagraph.models.retry import RetryPolicy, TransientModelError
from personagraph.models.settings import ModelSettings
from personagraph.models.spec import LOCAL_MODELS, LocalModel, ModelSpec, parse_spec

__all__ = [
    "LOCAL_MODELS",
    "Completion",
    "LocalModel",
    "Meter",
    "ModelClient",
    "ModelSettings",
    "ModelSpec",
    "RetryPolicy",
    "Structured",
    "TransientModelError",
    "cache_key",
    "extract_json",
    "make_chat_model",
    "parse_spec",
]
