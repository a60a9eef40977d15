"""The judge interface every judging path talks to, and the adapter that makes any chat-like object a judge.

A judge is anything with a ``name`` (how verdicts name it) and ``structured(messages, schema)`` returning
a :class:`~personagraph.models.Structured` reply validated against ``schema``: a
:class:`~personagraph.models.ModelClient` built from a model spec already is one. :class:`PluginJudge`
wraps what a user plugs in (``--judge module:attr`` or an object): a function ``(messages) -> str``, a
LangChain chat model, a Runnable, a compiled graph or an Agent (see ``agents/plugin.py``); its reply text
is parsed as the schema's JSON object, and a reply that does not parse is a failed verdict with its raw
text, never a score.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, ValidationError

from personagraph.agents.plugin import PluginAgent, adapt
from personagraph.models import Structured, parse_structured

T = TypeVar("T", bound=BaseModel)
Messages = list[dict[str, str]]


@runtime_checkable
class Judge(Protocol):
    """Scores by answering a rubric prompt with a JSON object of ``schema``'s shape."""

    name: str

    async def structured(self, messages: Messages, schema: type[T], **options: Any) -> Structured[T]: ...


class PluginJudge:
    """A plug-in object as a :class:`Judge` named ``name`` (``options`` such as ``top_logprobs`` are
    ignored: a plug-in gives text only)."""

    def __init__(self, agent: PluginAgent) -> None:
        self.agent = agent
        self.name = agent.name

    def __repr__(self) -> str:
        return f"PluginJudge({self.name!r})"

    async def structured(self, messages: Messages, schema: type[T], **options: Any) -> Structured[T]:
        reply = await self.agent.complete(messages)
        if not reply.ok:
            return Structured(status="failed", raw=reply.text, error=reply.error)
        try:
            return Structured(
                status="ok", value=parse_structured(reply.text, schema), raw=reply.text
            )
        except (ValueError, ValidationError) as exc:
            reason = str(exc).splitlines()[0][:200]
            return Structured(
                status="failed", raw=reply.text, error=f"{self.name}: reply is not a valid verdict ({reason})"
            )


def as_judge(obj: Any, name: str) -> Judge:
    """``obj`` if it already is a :class:`Judge`, else a :class:`PluginJudge` named ``name``.

    Raises:
        PersonagraphError: an object that cannot be adapted (the plug-in adapter's one-line error).
    """
    if isinstance(obj, Judge):
        return obj
    return PluginJudge(obj if isinstance(obj, PluginAgent) else adapt(obj, name))
