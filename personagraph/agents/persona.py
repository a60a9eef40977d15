"""The default persona agent: a chat model with PersonaGym's persona system prompt."""

from __future__ import annotations

from personagraph.agents.base import Agent
from personagraph.judges.refusal import detect_refusal
from personagraph.models import Completion, ModelClient
from personagraph.prompts import load_prompt, render
from personagraph.schemas import Answer, Question, short_id


class PersonaAgent:
    """Answers as ``persona`` using the system prompt in ``prompts/persona.yaml`` (or ``system_prompt``)."""

    def __init__(self, client: ModelClient, system_prompt: str | None = None) -> None:
        self.client = client
        self.name = client.name
        self.system_prompt = system_prompt or load_prompt("persona").system

    async def respond(self, persona: str, messages: list[dict[str, str]]) -> Completion:
        system = {"role": "system", "content": render(self.system_prompt, {"persona": persona}).strip()}
        return await self.client.complete([system, *messages])


async def answer_question(agent: Agent, persona: str, question: Question) -> Answer:
    """The agent's answer to one evaluation question, with persona breaks flagged.

    A failed call or an empty reply is a failed answer (kept with its reason, never judged).
    """
    reply = await agent.respond(persona, [{"role": "user", "content": question.text}])
    answer_id = short_id(question.id, agent.name)
    common = dict(id=answer_id, question_id=question.id, persona_id=question.persona_id,
                  task=question.task, model=agent.name)
    if not reply.ok:
        return Answer(**common, status="failed", error=reply.error)
    text = reply.text.strip()
    if not text:
        return Answer(**common, status="failed", error="empty answer")
    marker = detect_refusal(text)
    return Answer(**common, status="ok", text=text, refusal=marker is not None, refusal_marker=marker)
