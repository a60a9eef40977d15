"""Spec → where its calls go (:class:`Route`) and, for LangChain users, a chat model.

The one place that resolves an endpoint and its key, once per client, in this order: flags and the
Python API (they fill :class:`ModelSettings`), then the settings' named endpoints, then the environment
(``OPENAI_BASE_URL``, ``OPENAI_API_KEY``, an endpoint's ``key-env`` variable), then the provider's default.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from langchain_core.language_models.chat_models import BaseChatModel

from personagraph.errors import PersonagraphError
from personagraph.models.engine import engine_for
from personagraph.models.local import LocalChatModel
from personagraph.models.providers import PROVIDER_RULES, ProviderRules
from personagraph.models.settings import ModelSettings, StructuredMode
from personagraph.models.spec import ModelSpec, parse_spec
from personagraph.models.testing import ScriptedChatModel


@dataclass(frozen=True)
class Route:
    """Where one client's calls go, resolved once by :func:`resolve_route`.

    ``url`` is "" for providers without one (test) or whose server starts at the first call (local).
    ``cache_url`` is the endpoint as the response-cache key holds it ("" for the provider's own service,
    so runs made before endpoints were resolved keep their keys). ``limit_key`` groups the clients that
    share one concurrency limit: every model of a self-hosted endpoint, one model of a hosted service.
    """

    rules: ProviderRules
    url: str
    concurrency: int
    cache_url: str
    limit_key: str
    structured: StructuredMode
    endpoint: str = ""  # the endpoint's name ("" for the default), for traces
    api_key: str = field(default="", repr=False)


def resolve_route(spec: ModelSpec, settings: ModelSettings) -> Route:
    """Resolves the endpoint, key, concurrency and structured-output mode of ``spec``.

    Raises:
        PersonagraphError: an unknown endpoint name, an endpoint whose key variable is not set, or no key
            for the provider's own service.
    """
    rules = PROVIDER_RULES[spec.provider]
    if not rules.endpoints:
        concurrency = engine_for(spec.name).slots if rules.engine_slots else settings.concurrency
        return Route(
            rules, "", concurrency, "", str(spec), _structured(settings, rules.self_hosted_structured)
        )
    if spec.endpoint is not None:
        named = settings.endpoint(spec.endpoint)
        if named is None:
            known = ", ".join(e.name for e in settings.endpoints) or "none"
            raise PersonagraphError(
                f"model spec {spec}: no endpoint named {spec.endpoint!r} (defined: {known}); "
                "add --endpoint NAME=URL[,key-env=VAR]"
            )
        key = ""
        if named.key_env:
            key = os.environ.get(named.key_env, "")
            if not key:
                state = "is empty" if named.key_env in os.environ else "is not set"
                raise PersonagraphError(f"endpoint {named.name}: the key variable ${named.key_env} {state}")
        url, concurrency = named.url, named.concurrency or settings.concurrency
    else:
        url = (
            settings.base_url
            or (os.environ.get(rules.url_env) if rules.url_env else None)
            or rules.default_url
        )
        key = (
            settings.api_key.get_secret_value()
            if settings.api_key
            else os.environ.get(rules.key_env or "", "")
        )
        concurrency = settings.concurrency
        if not key and rules.hosted(url):
            raise PersonagraphError(
                f"{spec}: no API key; set {rules.key_env} or pass --api-key "
                "(or --base-url / --endpoint for a self-hosted server)"
            )
    hosted = rules.hosted(url)
    return Route(
        rules,
        url,
        concurrency,
        cache_url="" if hosted else url,
        limit_key=f"{url} {spec.name}" if hosted else url,
        structured=_structured(settings, rules.hosted_structured if hosted else rules.self_hosted_structured),
        endpoint=spec.endpoint or "",
        api_key=key,
    )


def _structured(settings: ModelSettings, auto: StructuredMode) -> StructuredMode:
    return auto if settings.structured == "auto" else settings.structured


def make_chat_model(spec: str | ModelSpec, settings: ModelSettings | None = None) -> BaseChatModel:
    """A LangChain chat model for a spec, for code that wants one (examples, plug-in agents).

    personagraph's own roles call through :class:`~personagraph.models.client.ModelClient` instead;
    both resolve the endpoint here (:func:`resolve_route`).
    """
    from langchain_openai import ChatOpenAI  # noqa: PLC0415 - optional heavy import, only for openai: specs

    parsed = parse_spec(spec) if isinstance(spec, str) else spec
    settings = settings or ModelSettings()
    sampling = {"temperature": settings.temperature, "max_tokens": settings.max_tokens, "seed": settings.seed}
    if parsed.provider == "test":
        return ScriptedChatModel(model_name=parsed.name)
    if parsed.provider == "local":
        return LocalChatModel(model_name=parsed.name, **sampling)
    route = resolve_route(parsed, settings)
    return ChatOpenAI(
        model=parsed.name,
        base_url=route.url,
        api_key=route.api_key
        or "not-needed",  # self-hosted servers usually ignore the key; the SDK wants one
        timeout=settings.timeout_s,
        max_retries=0,  # retries, with backoff and Retry-After, live in ModelClient
        **sampling,
    )
