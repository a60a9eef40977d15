"""The chat model the examples use: ``PERSONAGRAPH_EXAMPLE_MODEL`` (default the embedded 0.5B model).

Any LangChain chat model works in its place (``ChatOpenAI(...)``, ``ChatOllama(...)``, …); the examples
only call ``invoke``/``ainvoke`` on it.
"""

from __future__ import annotations

import os
from functools import cache

from langchain_core.language_models.chat_models import BaseChatModel

from personagraph.models import ModelSettings, make_chat_model

DEFAULT_SPEC = "local:qwen2.5-coder-0.5b"


def example_spec() -> str:
    return os.environ.get("PERSONAGRAPH_EXAMPLE_MODEL", DEFAULT_SPEC)


@cache
def _build(spec: str) -> BaseChatModel:
    return make_chat_model(spec, ModelSettings(temperature=0.7, max_tokens=256))


def chat_model() -> BaseChatModel:
    """The examples' chat model (built once per spec, at first use)."""
    return _build(example_spec())
