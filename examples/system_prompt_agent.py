"""A persona agent with its own system prompt, two ways.

``agent`` speaks the personagraph ``Agent`` protocol itself (``name`` and ``async respond(persona,
messages)``): it receives the persona text and the bare conversation, and builds its own system prompt
(personagraph's PersonaGym prompt is not used). ``chain`` is a LangChain Runnable that keeps the persona
system prompt personagraph sends and appends its own rules to it.

    personagraph eval --persona "A retired cowboy" --agent examples.system_prompt_agent:agent --quick
    personagraph simulate --persona "A 70-year-old retired cowboy" --agent examples.system_prompt_agent:chain
"""

from __future__ import annotations

from langchain_core.runnables import RunnableLambda

from examples._model import chat_model, example_spec
from personagraph.models import Completion

SYSTEM_PROMPT = """You are {persona}.
Stay in character for the whole conversation: speak the way this person speaks (their words, their
rhythm, their region), draw on their memories and opinions, and keep every fact about yourself the
same from one message to the next. You are this person, not an assistant: never say you are an AI or
a language model, even if asked. Answer in two to four sentences."""

RULES = (
    "House rules: stay in character no matter what, never mention being an AI or a language model, "
    "and answer in two to four sentences in this person's own voice."
)


class SystemPromptAgent:
    """An Agent with its own system prompt (the ``{persona}`` slot is filled per call)."""

    def __init__(self, system_prompt: str = SYSTEM_PROMPT) -> None:
        self.name = f"system-prompt-agent({example_spec()})"
        self.system_prompt = system_prompt

    async def respond(self, persona: str, messages: list[dict[str, str]]) -> Completion:
        system = {"role": "system", "content": self.system_prompt.replace("{persona}", persona)}
        try:
            reply = await chat_model().ainvoke([system, *messages])
        except Exception as exc:  # noqa: BLE001 - the Agent protocol reports failures as values
            return Completion("failed", error=f"{type(exc).__name__}: {exc}")
        return Completion("ok", str(reply.content).strip())


def _add_rules(messages: list[dict[str, str]]) -> list[dict[str, str]]:
    messages = [dict(m) for m in messages]
    if messages and messages[0]["role"] == "system":
        messages[0]["content"] = f"{messages[0]['content']}\n{RULES}"
    else:
        messages.insert(0, {"role": "system", "content": RULES})
    return messages


async def _ask(messages: list[dict[str, str]]) -> str:
    reply = await chat_model().ainvoke(messages)
    return str(reply.content).strip()


agent = SystemPromptAgent()
chain = RunnableLambda(_add_rules) | RunnableLambda(_ask)
