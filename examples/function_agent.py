"""A plain function agent: ``(messages) -> str``.

personagraph calls it with OpenAI-style messages; the first one is the persona system prompt, so the
function knows who it is meant to be. Sync functions run in a worker thread; async ones are awaited.

    personagraph eval --persona "A 70-year-old retired cowboy" --agent examples.function_agent:agent --quick
    personagraph simulate --persona "A 70-year-old retired cowboy" --agent examples.function_agent:async_agent
"""

from __future__ import annotations

from examples._model import chat_model


def agent(messages: list[dict[str, str]]) -> str:
    """Sync: the persona system prompt plus the conversation go straight to a chat model."""
    reply = chat_model().invoke(messages)
    return str(reply.content).strip()


async def async_agent(messages: list[dict[str, str]]) -> str:
    """Async: same, awaited; here the reply is also cut to its first three sentences."""
    reply = await chat_model().ainvoke(messages)
    text = str(reply.content).strip()
    sentences = text.replace("!", "!|").replace("?", "?|").replace(". ", ".|").split("|")
    return " ".join(s.strip() for s in sentences[:3] if s.strip()) or text


def persona_of(messages: list[dict[str, str]]) -> str:
    """The persona system prompt personagraph put first (handy in a function that builds its own prompt)."""
    return next((m["content"] for m in messages if m["role"] == "system"), "")
