"""The default persona agent: a chat model with PersonaGym's persona system prompt."""

from __future__ import annotations

from personagraph.agents.base import Agent
from personagraph.judges.refusal import detect_refusal
from personagraph.models import Completion, ModelClient
from personagraph.prompts import load_prompt, render
from personagraph.resources import read_yaml
from personagraph.schemas import Answer, Question, short_id


class PersonaAgent:
    """Answers as ``persona`` using the system prompt in ``prompts/persona.yaml`` (or ``system_prompt``);
    ``brief`` adds that file's ``brief`` line, asking for two or three sentences."""

    def __init__(self, client: ModelClient, system_prompt: str | None = None, *, brief: bool = False) -> None:
        self.client = client
        self.name = client.name
        self.system_prompt = system_prompt or load_prompt("persona").system
        self.brief = str(read_yaml("prompts/persona.yaml")["brief"]).strip() if brief else ""

    async def respond(self, persona: str, messages: list[dict[str, str]]) -> Completion:
        text = render(self.system_prompt, {"persona": persona}).strip()
        system = {"role": "system", "content": f"{text} {self.brief}" if self.brief else text}
        return await self.client.complete([system, *messages])


def sample_seed(seed: int, sample: int) -> int:
    """The sampling seed of a question's ``sample``-th answer in a run seeded ``seed``: ``seed`` itself for
    sample 0 (its calls keep their cache keys), a hash of both for the others (distinct, and not another
    run's sample 0: runs seeded 0 and 1 share no sample)."""
    return seed if sample == 0 else int(short_id(str(seed), "sample", str(sample)), 16) % 2**31


async def answer_question(agent: Agent, persona: str, question: Question, sample: int = 0) -> Answer:
    """The agent's answer to one evaluation question, with persona breaks flagged.

    A failed call or an empty reply is a failed answer (kept with its reason, never judged). ``sample``:
    which repeated sample this is (``agent`` is the one that samples it); sample 0 keeps the answer ids of
    runs without samples.
    """
    reply = await agent.respond(persona, [{"role": "user", "content": question.text}])
    answer_id = short_id(question.id, agent.name) if sample == 0 else short_id(question.id, agent.name,
                                                                               f"sample {sample}")
    common = dict(id=answer_id, question_id=question.id, persona_id=question.persona_id,
                  task=question.task, model=agent.name, sample=sample)
    if not reply.ok:
        return Answer(**common, status="failed", error=reply.error)
    text = reply.text.strip()
    if not text:
        return Answer(**common, status="failed", error="empty answer")
    marker = detect_refusal(text)
    return Answer(**common, status="ok", text=text, refusal=marker is not None, refusal_marker=marker,
                  at_token_limit=reply.at_token_limit)
