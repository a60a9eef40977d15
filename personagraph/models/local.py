"""Embedded models as a LangChain chat model, for code that wants one (examples, plug-in agents).

personagraph's own roles do not use it: :class:`~personagraph.models.client.ModelClient` posts to the
model's engine (:mod:`personagraph.models.engine`) over the same HTTP path as ``openai:`` specs. This
class posts there too, so both see the same server, batching and crash handling.
"""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, convert_to_openai_messages
from langchain_core.outputs import ChatGeneration, ChatResult

from personagraph.models import openai_http
from personagraph.models.engine import engine_for


class LocalChatModel(BaseChatModel):
    """A LangChain chat model over an embedded model's llama.cpp server.

    Accepts ``response_format={"type": "json_object", "schema": {...}}`` per call, which llama.cpp turns
    into a grammar (schema-constrained decoding); ranges such as minimum/maximum are not enforced by
    the grammar, so callers still validate.
    """

    model_name: str
    temperature: float = 0.0
    max_tokens: int = 256
    seed: int = 0

    @property
    def _llm_type(self) -> str:
        return "personagraph-llama-server"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_name": self.model_name, "temperature": self.temperature, "max_tokens": self.max_tokens}

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        body: dict[str, Any] = {
            "model": self.model_name,
            "messages": convert_to_openai_messages(messages),
            "temperature": kwargs.get("temperature", self.temperature),
            "max_tokens": kwargs.get("max_tokens", self.max_tokens),
            "seed": kwargs.get("seed", self.seed),
        }
        if stop:
            body["stop"] = stop
        if kwargs.get("response_format"):
            body["response_format"] = kwargs["response_format"]
        async with engine_for(self.model_name).pinned(body["messages"]) as (base_url, slot):
            reply = await openai_http.chat_completion(base_url, "", {**body, **slot}, timeout_s=None)
        message = AIMessage(
            content=reply.text,
            usage_metadata={"input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens,
                            "total_tokens": reply.input_tokens + reply.output_tokens},
        )
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        """Synchronous callers (``invoke``) run the async call in a loop of their own."""
        return asyncio.run(self._agenerate(messages, stop, **kwargs))
