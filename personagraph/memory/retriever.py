"""A user's memories as a LangChain retriever, so that an agent you wrote recalls from the same Chroma bank
personagraph evaluates, with the same recall methods (:mod:`personagraph.memory.recall`)::

    retriever = MemoryBank("runs/memory/chroma").as_retriever(user="bart", method="fusion", k=3)
    docs = retriever.invoke("I miss the beach trip we took")   # or await retriever.ainvoke(...)

The query is the user's latest turn. Each :class:`~langchain_core.documents.Document` holds the memory's
event text; its metadata the memory's fields (``memory_id``, ``user_id``, ``time``, ``scene``,
``emotion``, and its own metadata), the recall ``score`` and the ``components`` that made it.
"""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field

from personagraph.errors import PersonagraphError
from personagraph.memory.context import DialogueContext, context_from_messages
from personagraph.memory.recall import Recalled, Recaller


def _context(query: str) -> DialogueContext:
    return context_from_messages([{"role": "user", "content": query}])


def as_document(found: Recalled) -> Document:
    """A recalled memory as a LangChain document (see the module docstring for its metadata)."""
    memory = found.memory
    metadata: dict[str, Any] = {
        **memory.metadata,
        "memory_id": memory.id,
        "user_id": memory.user_id,
        "time": memory.time,
        "scene": memory.scene,
        "emotion": memory.emotion,
        "score": found.score,
        "components": dict(found.components),
    }
    return Document(id=memory.id, page_content=memory.event, metadata=metadata)


class MemoryRetriever(BaseRetriever):
    """The top ``k`` memories of ``user`` for a query, ranked by ``recaller``'s method; reranked by its LLM
    reranker on the async path (``ainvoke``) when one is configured. Build it with
    :meth:`MemoryBank.as_retriever <personagraph.memory.bank.MemoryBank.as_retriever>`."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    recaller: Recaller
    user: str
    k: int = Field(4, ge=1)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        if self.recaller.settings.rerank_top and self.recaller.reranker is not None:
            raise PersonagraphError("memory retriever: LLM reranking is async; call ainvoke, not invoke")
        return [as_document(r) for r in self.recaller.rank(self.user, _context(query), self.k)]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        return [as_document(r) for r in await self.recaller.recall(self.user, _context(query), self.k)]
