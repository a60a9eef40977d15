"""Environment selection and per-task question generation (PersonaGym steps 1 and 2)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import numpy as np

from personagraph.environments.pool import load_pool
from personagraph.models import ModelClient
from personagraph.prompts import load_prompt
from personagraph.schemas import Environment, EnvironmentChoice, QuestionList, Task, at_most


@dataclass
class Selection:
    """The chosen environments; names outside the pool are dropped and counted, never kept."""

    environments: list[Environment]
    unknown: list[str] = field(default_factory=list)
    status: str = "ok"
    error: str | None = None
    shortlist: list[str] = field(default_factory=list)  # what the selector was shown, when not the whole pool


def pool_listing(pool: tuple[Environment, ...]) -> str:
    return "\n".join(f"- {env.name} ({env.category})" for env in pool)


def shortlist_pool(persona: str, size: int) -> tuple[Environment, ...]:
    """The ``size`` pool environments closest to the persona by sentence embedding, closest first.

    A small selector model reading a list of 200 names mostly picks from its top; showing it the
    environments nearest the persona keeps the choice relevant and the prompt short. ``size`` 0 (or one
    covering the pool) returns the whole pool in file order.
    """
    pool = load_pool()
    if size <= 0 or size >= len(pool):
        return pool
    from personagraph.embeddings import encode

    vectors = encode([f"{env.name}: {env.description}" for env in pool])
    similarity = vectors @ encode([persona])[0]
    return tuple(pool[i] for i in np.argsort(-similarity, kind="stable")[:size])


async def select_environments(client: ModelClient, persona: str, k: int, shortlist: int = 0) -> Selection:
    """Asks the selector for ``k`` environments from the pool; keeps only names that are in it.

    With ``shortlist`` > 0 the selector sees only that many environments, the ones closest to the
    persona (see :func:`shortlist_pool`). When the model fails or names nothing usable, the selection
    is ``failed`` (the run records why) rather than silently falling back to arbitrary environments.
    """
    shown = await asyncio.to_thread(shortlist_pool, persona, shortlist)
    by_name = {env.name.lower(): env for env in load_pool()}
    listed = [env.name for env in shown] if len(shown) < len(by_name) else []
    messages = load_prompt("select_environments").messages(pool=pool_listing(shown), persona=persona, k=k)
    reply = await client.structured(messages, at_most(EnvironmentChoice, "environments", k + 2))
    if not reply.ok or reply.value is None:
        return Selection([], status="failed", error=reply.error, shortlist=listed)
    chosen: list[Environment] = []
    unknown: list[str] = []
    for name in reply.value.environments:
        env = by_name.get(name.strip().strip("-•* ").split(" (")[0].strip().lower())
        if env is None:
            unknown.append(name)
        elif env not in chosen:
            chosen.append(env)
    chosen = chosen[:k]
    if not chosen:
        return Selection([], unknown, status="failed", error="no selected name is in the environment pool",
                         shortlist=listed)
    return Selection(chosen, unknown, shortlist=listed)


async def generate_questions(
    client: ModelClient, persona: str, task: Task, environments: list[Environment], n: int
) -> tuple[list[str], str | None]:
    """Writes ``n`` questions for one task; returns (questions, error). Blank and duplicate items are dropped."""
    listing = "\n".join(f"- {env.name}: {env.description}" for env in environments)
    messages = load_prompt("generate_questions").messages(
        task=task.name,
        task_description=task.description,
        requirements=task.question_requirements,
        persona=persona,
        environments=listing,
        n=n,
    )
    reply = await client.structured(messages, at_most(QuestionList, "questions", n))
    if not reply.ok or reply.value is None:
        return [], reply.error
    seen: set[str] = set()
    questions: list[str] = []
    for text in reply.value.questions:
        text = " ".join(text.split())
        if text and text.lower() not in seen:
            seen.add(text.lower())
            questions.append(text)
    if not questions:
        return [], "the generator returned no usable question"
    return questions[:n], None
