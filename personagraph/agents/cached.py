"""Plug-in agents' replies through the run store's response cache, like every model call."""

from __future__ import annotations

import time
from typing import Any

from personagraph.agents.base import Agent
from personagraph.models import Completion, Meter, cache_key
from personagraph.models.client import bounded
from personagraph.store import CallRow


class CachedAgent:
    """Wraps an agent so that a reply it gave for the same persona and conversation is not asked again.

    Model agents get this from :class:`~personagraph.models.ModelClient`; a plug-in (any ``module:attr``
    agent) gets it here, so a resumed run makes 0 calls to it and the meter counts its calls and
    cache hits under ``role``. Failed replies are not stored: they are tried again on resume.

    Args:
        agent: the agent to wrap; its ``name`` is kept (results name the plug-in, not the wrapper).
        store: the run store (or a proxy with ``get_call``/``put_call``).
        meter: where calls and cache hits are counted.
        role: the meter's role for these calls.
        sample: which repeated sample of each request this wrapper answers (``eval --samples``): a sample
            other than 0 is its own cache entry, so the agent is asked again for it.
        max_tokens: the reply budget (``--max-answer-tokens``): a longer reply is cut where a model's would be
            (:func:`~personagraph.models.client.bounded`) and marked, before it is stored or judged.
    """

    def __init__(self, agent: Agent, store: Any, meter: Meter, role: str = "persona", sample: int = 0,
                 max_tokens: int | None = None) -> None:
        self.agent = agent
        self.name = agent.name
        self.store = store
        self.meter = meter
        self.role = role
        self.sample = sample
        self.max_tokens = max_tokens

    def __repr__(self) -> str:
        return f"CachedAgent({self.agent!r})"

    async def respond(self, persona: str, messages: list[dict[str, str]]) -> Completion:
        """The agent's reply, from the store when this exact request has been answered before."""
        request = [{"role": "persona", "content": persona}, *messages]
        params = {"sample": self.sample} if self.sample else {}  # sample 0: the key of runs without samples
        key = cache_key(f"agent:{self.name}", "", request, params)
        if (row := self.store.get_call(key)) is not None:
            self.meter._add(self.meter.cache_hits, self.role)
            text, cut = bounded(row.text, self.max_tokens)
            return Completion("ok", text, cached=True, truncated=cut, at_token_limit=cut)
        started = time.perf_counter()
        reply = await self.agent.respond(persona, messages)
        if not reply.ok:
            self.meter._add(self.meter.failures, self.role)
            return reply
        self.meter._add(self.meter.calls, self.role)
        text, cut = bounded(reply.text, self.max_tokens)
        self.store.put_call(
            CallRow(key, self.role, self.name, text, 0, 0, time.perf_counter() - started),
            {"messages": request, "params": params},
        )
        return Completion("ok", text, truncated=cut, at_token_limit=reply.at_token_limit or cut)
