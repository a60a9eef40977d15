"""The agent interface every graph talks to."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from personagraph.models import Completion


@runtime_checkable
class Agent(Protocol):
    """Something that speaks as a persona: given the persona and the conversation so far, it replies.

    ``messages`` holds only the conversation (``user``/``assistant`` turns); how the persona is
    conveyed (a system prompt, a memory, nothing at all) is the agent's business. ``name`` identifies
    the agent in results (a model spec or a ``module:attr`` path).
    """

    name: str

    async def respond(self, persona: str, messages: list[dict[str, str]]) -> Completion: ...
