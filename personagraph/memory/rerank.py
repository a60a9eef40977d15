"""Optional LLM reranking of the top recalled memories (one structured call per query)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from personagraph.memory.context import DialogueContext
from personagraph.prompts import load_prompt

if TYPE_CHECKING:
    from personagraph.memory.recall import Recalled
    from personagraph.models import ModelClient

log = logging.getLogger(__name__)


class RerankReply(BaseModel):
    """The reranker's answer: memory numbers (1-based), best first."""

    ranking: list[int] = Field(description="memory numbers, best first")


def render_dialogue(context: DialogueContext, limit: int = 12) -> str:
    """The last ``limit`` turns as ``Speaker: text`` lines."""
    return "\n".join(f"{t.speaker}: {t.text}" for t in context.turns[-limit:])


async def rerank(
    client: ModelClient, context: DialogueContext, found: list[Recalled], top: int
) -> list[Recalled]:
    """Reorders the first ``top`` memories by the model's ranking; the rest keep their places.

    A failed or incomplete reply is not an error: unranked candidates keep their retrieval order after
    the ranked ones, and a failed call leaves the order unchanged.
    """
    head, tail = found[:top], found[top:]
    memories = "\n".join(
        f"{i + 1}. ({r.memory.time}, {r.memory.emotion}) {r.memory.event}" for i, r in enumerate(head)
    )
    messages = load_prompt("memory_rerank").messages(dialogue=render_dialogue(context), memories=memories)
    reply = await client.structured(messages, RerankReply)
    if not reply.ok or reply.value is None:
        log.info("memory rerank failed (%s); keeping the retrieval order", reply.error)
        return found
    order = [n - 1 for n in dict.fromkeys(reply.value.ranking) if 1 <= n <= len(head)]
    order += [i for i in range(len(head)) if i not in order]
    return [head[i] for i in order] + tail
