"""LangSmith traces of model calls: one LLM run per call, cache hits included, under the node that made it.

With tracing on (``LANGSMITH_TRACING=true`` or a ``langsmith.tracing_context(enabled=True)``) every call
of :class:`~personagraph.models.client.ModelClient` — over HTTP, to an embedded engine, to a test model,
or answered from the run's cache — is one ``llm`` run carrying its role, model, endpoint, tokens and
``cache_hit``; LangSmith measures its latency. The parent is whatever run is current: inside a LangGraph
node, LangChain sets the node's run as the tracing parent, so the call nests under its node.
With tracing off the cost is one :func:`enabled` check per call.
"""

from __future__ import annotations

from typing import Any

from langsmith import run_helpers
from langsmith import utils as ls_utils


def enabled() -> bool:
    """Whether model calls are traced now (the environment, or a ``tracing_context`` around the call)."""
    return bool(ls_utils.tracing_is_enabled())


def llm_run(
    name: str,
    *,
    role: str,
    provider: str,
    model: str,
    endpoint: str,
    messages: list[dict[str, str]],
    params: dict[str, Any],
) -> run_helpers.trace:
    """The LangSmith run of one model call (an async context manager); end it with :func:`finish`."""
    return run_helpers.trace(
        name,
        run_type="llm",
        inputs={"messages": messages, **params},
        tags=[role],
        metadata={
            "role": role,
            "ls_provider": provider,
            "ls_model_name": model,
            "endpoint": endpoint or "default",
            **{f"ls_{k}": v for k, v in params.items() if k in ("temperature", "max_tokens")},
        },
    )


def finish(
    run: Any, *, text: str, error: str | None, cached: bool, input_tokens: int, output_tokens: int
) -> None:
    """Ends the run with the reply (in OpenAI's shape, which LangSmith renders), tokens and ``cache_hit``."""
    run.metadata["cache_hit"] = cached
    run.end(
        outputs={
            "choices": [{"message": {"role": "assistant", "content": text}}],
            "usage_metadata": {
                "input_tokens": input_tokens,
                "output_tokens": output_tokens,
                "total_tokens": input_tokens + output_tokens,
            },
        },
        error=error,
    )
