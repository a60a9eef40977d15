"""The bank as a LangChain retriever: the recall methods' own rankings, one user's memories only, sync and
async (with the LLM reranker), and inside a LangGraph agent of the user's own."""

from __future__ import annotations

import json
from typing import TypedDict

import pytest
from langchain_core.retrievers import BaseRetriever
from langgraph.graph import END, START, StateGraph

from personagraph.errors import PersonagraphError
from personagraph.memory.bank import MemoryBank
from personagraph.memory.context import context_from_messages
from personagraph.memory.recall import METHODS, Recaller, RecallSettings
from personagraph.models import ModelClient
from personagraph.models.testing import register_script

BEACH = "We went to the beach and I surfed big waves in the sea!"


@pytest.mark.parametrize("method", METHODS)
def test_each_method_ranks_as_recall_does_within_the_user(two_users: MemoryBank, method: str) -> None:
    retriever = two_users.as_retriever(user="a", method=method, k=3)
    assert isinstance(retriever, BaseRetriever)
    docs = retriever.invoke(BEACH)
    expected = Recaller(two_users, RecallSettings(method=method)).rank(
        "a", context_from_messages([{"role": "user", "content": BEACH}]), k=3)
    assert [d.id for d in docs] == [r.memory.id for r in expected]
    assert [d.metadata["score"] for d in docs] == [r.score for r in expected]
    assert {d.metadata["user_id"] for d in docs} == {"a"} and docs[0].metadata["memory_id"] == "1"
    assert docs[0].page_content == "Anna swam in the sea at the beach and built a sandcastle."
    assert docs[0].metadata["scene"] == "Activity" and docs[0].metadata["time"] == "2023-07-01"


async def test_async_path_reranks_with_the_llm(two_users: MemoryBank) -> None:
    plain = await two_users.as_retriever(user="a", k=3).ainvoke("beach day")
    assert [d.id for d in plain] == [d.id for d in two_users.as_retriever(user="a", k=3).invoke("beach day")]
    register_script("retriever-reverse", lambda messages, schema: json.dumps({"ranking": [3, 2, 1]}))
    reranking = two_users.as_retriever(user="a", k=3, settings=RecallSettings(rerank_top=3),
                                       reranker=ModelClient.create("test:retriever-reverse", "rerank"))
    assert [d.id for d in await reranking.ainvoke("beach day")] == [d.id for d in plain][::-1]
    with pytest.raises(PersonagraphError, match="reranking is async; call ainvoke"):
        reranking.invoke("beach day")


def test_a_user_without_memories_gets_none_and_bad_settings_are_one_line(two_users: MemoryBank) -> None:
    assert two_users.as_retriever(user="nobody").invoke(BEACH) == []
    with pytest.raises(PersonagraphError, match="method='cosine': unknown; choose one of dense, bm25"):
        two_users.as_retriever(user="a", method="cosine")
    with pytest.raises(PersonagraphError, match="k=0: must be at least 1"):
        two_users.as_retriever(user="a", k=0)


class State(TypedDict):
    question: str
    memories: list[str]
    reply: str


def test_a_langgraph_agent_of_the_users_own_recalls_from_the_bank(two_users: MemoryBank) -> None:
    retriever = two_users.as_retriever(user="b", k=1)

    def recall(state: State) -> dict:
        return {"memories": [d.page_content for d in retriever.invoke(state["question"])]}

    def respond(state: State) -> dict:
        return {"reply": f"I remember: {state['memories'][0]}"}

    builder = StateGraph(State)
    builder.add_node("recall", recall)
    builder.add_node("respond", respond)
    builder.add_edge(START, "recall")
    builder.add_edge("recall", "respond")
    builder.add_edge("respond", END)
    out = builder.compile().invoke({"question": "Do you remember surfing at the beach?"})
    assert out["reply"] == "I remember: Ben went to the beach, swam in the sea and surfed the waves."
