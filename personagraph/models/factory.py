"""Spec string → LangChain chat model: the one place that knows the providers."""

from __future__ import annotations

import os

from langchain_core.language_models.chat_models import BaseChatModel

from personagraph.errors import PersonagraphError
from personagraph.models.settings import ModelSettings
from personagraph.models.spec import ModelSpec, parse_spec


def make_chat_model(spec: str | ModelSpec, settings: ModelSettings | None = None) -> BaseChatModel:
    """Builds the chat model for a spec; every role gets its model through here.

    ``openai:<model>`` goes to any OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, llama.cpp server):
    ``settings.base_url``/``settings.api_key`` or the ``OPENAI_BASE_URL``/``OPENAI_API_KEY`` variables.
    ``local:<name>`` is an embedded model served by its llama.cpp engine (models/engine.py); ``test:<name>`` is the deterministic test model.
    """
    parsed = parse_spec(spec) if isinstance(spec, str) else spec
    settings = settings or ModelSettings()
    if parsed.provider == "test":
        from personagraph.models.testing import ScriptedChatModel

        return ScriptedChatModel(model_name=parsed.name)
    if parsed.provider == "local":
        from personagraph.models.local import LocalChatModel

        return LocalChatModel(
            model_name=parsed.name,
            temperature=settings.temperature,
            max_tokens=settings.max_tokens,
            seed=settings.seed,
        )
    from langchain_openai import ChatOpenAI

    base_url = settings.base_url or os.environ.get("OPENAI_BASE_URL") or None
    api_key = settings.api_key.get_secret_value() if settings.api_key else os.environ.get("OPENAI_API_KEY")
    if not api_key:
        if not base_url:
            raise PersonagraphError(
                f"{parsed}: no API key; set OPENAI_API_KEY or pass --api-key (or --base-url for a local server)"
            )
        api_key = "not-needed"  # self-hosted servers usually ignore the key
    return ChatOpenAI(
        model=parsed.name,
        base_url=base_url,
        api_key=api_key,
        temperature=settings.temperature,
        max_tokens=settings.max_tokens,
        seed=settings.seed,
        timeout=settings.timeout_s,
        max_retries=0,  # retries, with backoff and Retry-After, live in ModelClient
    )
