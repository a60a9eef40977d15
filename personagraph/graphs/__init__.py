"""LangGraph StateGraphs. They only wire: prompts, model calls and scoring live in the other rooms.

A graph's nodes take their live objects (store, model clients, agents) from the run's context. Code
passes that object itself (``context=EvalContext(...)``); a deployed graph (``langgraph dev``, Studio)
receives plain settings instead, which build the live context once (``personagraph.studio``).
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar, runtime_checkable

from langgraph.runtime import Runtime

C = TypeVar("C")


@runtime_checkable
class ContextSettings(Protocol):
    """Serializable settings that build a graph's live context (the same object for every node of a run)."""

    def live(self) -> Any: ...


def live_context(runtime: Runtime[Any], kind: type[C]) -> C:
    """The run's ``kind`` context: the object passed with ``context=``, or the one its settings build."""
    context = runtime.context
    if isinstance(context, kind):  # the common case first: a runtime-checkable Protocol check costs ~20 µs
        return context
    if isinstance(context, ContextSettings):
        context = context.live()
    if not isinstance(context, kind):
        raise TypeError(
            f"this graph's context must be a {kind.__name__} or settings that build one (context=...), "
            f"not {type(context).__name__}"
        )
    return context
