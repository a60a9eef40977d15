"""Environment selection and per-task question generation (PersonaGym steps 1 and 2)."""

from __future__ import annotations

from dataclasses import dataclass, field

from personagraph.environments.pool import load_pool
from personagraph.models import ModelClient
from personagraph.prompts import load_prompt
from personagraph.schemas import Environment, EnvironmentChoice, QuestionList, Task


@dataclass
class Selection:
    """The chosen environments; names outside the pool are dropped and counted, never kept."""

    environments: list[Environment]
    unknown: list[str] = field(default_factory=list)
    status: str = "ok"
    error: str | None = None


def pool_listing(pool: tuple[Environment, ...]) -> str:
    return "\n".join(f"- {env.name} ({env.category})" for env in pool)


async def select_environments(client: ModelClient, persona: str, k: int) -> Selection:
    """Asks the selector for ``k`` environments from the pool; keeps only names that are in it.

    When the model fails or names nothing usable, the selection is ``failed`` (the run records why)
    rather than silently falling back to arbitrary environments.
    """
    pool = load_pool()
    by_name = {env.name.lower(): env for env in pool}
    messages = load_prompt("select_environments").messages(pool=pool_listing(pool), persona=persona, k=k)
    reply = await client.structured(messages, EnvironmentChoice)
    if not reply.ok or reply.value is None:
        return Selection([], status="failed", error=reply.error)
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
        return Selection([], unknown, status="failed", error="no selected name is in the environment pool")
    return Selection(chosen, unknown)


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
    reply = await client.structured(messages, QuestionList)
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
