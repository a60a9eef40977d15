"""Environment selection and per-task question generation (PersonaGym steps 1 and 2).

Requested counts are honoured: when a reply has fewer usable items than asked for (names outside the
pool, blank or repeated questions, a short list), the same conversation asks for the missing ones, at
most :data:`MAX_TOP_UPS` times; what is still missing then is the result's ``shortfall``, which the run
records and shows. A failed call is not topped up: it is a failure, retried when the run is resumed.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np
from pydantic import BaseModel

from personagraph.embeddings import encode, encode_stored
from personagraph.environments.pool import load_pool
from personagraph.models import ModelClient
from personagraph.prompts import load_prompt
from personagraph.schemas import (
    QUESTION_MAX_CHARS,
    Environment,
    EnvironmentChoice,
    QuestionList,
    Task,
    at_most,
)

MAX_TOP_UPS = 3
"""Extra calls, at most, to make up a short reply (each asks only for what is missing)."""

# ".", "?" or "!", then closing quotes or brackets, then a space or the end
_SENTENCE_END = re.compile(r"[.?!][\"')\]]*(?=\s|$)")
_QUESTION_END = re.compile(r"\?[\"')\]]*(?=\s|$)")
_TRAILING_NOTE = re.compile(r"^(.*\?[\"')]*)\s*\([^()]*\)$")  # "…grow up? (Community Garden, Barn Dance)"
MIN_QUESTION_WORDS = 6
"""A first question shorter than this ("Did you hear?") is kept together with the one after it."""


@dataclass
class Selection:
    """The chosen environments; names outside the pool are dropped and counted, never kept."""

    environments: list[Environment]
    unknown: list[str] = field(default_factory=list)
    status: str = "ok"
    error: str | None = None
    shortlist: list[str] = field(default_factory=list)  # what the selector was shown, when not the whole pool
    requested: int = 0
    extra_calls: int = 0

    @property
    def shortfall(self) -> int:
        return max(0, self.requested - len(self.environments))


@dataclass
class QuestionBatch:
    """One task's generated questions; ``error`` when none came (or a call failed before the count was met)."""

    questions: list[str]
    error: str | None = None
    requested: int = 0
    extra_calls: int = 0

    @property
    def shortfall(self) -> int:
        return max(0, self.requested - len(self.questions))


async def _ask_for(
    client: ModelClient,
    messages: list[dict[str, str]],
    schema: Callable[[int], type[BaseModel]],
    wanted: int,
    take: Callable[[Any], str | None],
) -> tuple[int, int, str | None]:
    """Asks for ``wanted`` items, then for the missing ones in the same conversation (bounded).

    ``take(reply)`` keeps a reply's usable new items and returns how many are kept in total and, when
    some were unusable, why. Returns (items kept, extra calls made, error of a failed call).
    """
    kept, extra = 0, 0
    while True:
        reply = await client.structured(messages, schema(wanted - kept))
        if not reply.ok or reply.value is None:
            return kept, extra, reply.error
        kept, problem = take(reply.value)
        if kept >= wanted or extra == MAX_TOP_UPS:
            return kept, extra, None
        extra += 1
        follow_up = load_prompt("top_up").messages(
            got=kept, wanted=wanted, n=wanted - kept, problem=problem or "too few"
        )
        messages = [*messages, {"role": "assistant", "content": reply.raw}, *follow_up]


def pool_listing(pool: tuple[Environment, ...]) -> str:
    return "\n".join(f"- {env.name} ({env.category})" for env in pool)


@lru_cache(maxsize=1)
def _whole_pool() -> tuple[str, dict[str, Environment]]:
    """The whole pool's listing and the pool by lower-cased name, made once: every persona's selection
    reads them, and a large run starts thousands of selections at once."""
    return pool_listing(load_pool()), {env.name.lower(): env for env in load_pool()}


def shortlist_pool(persona: str, size: int) -> tuple[Environment, ...]:
    """The ``size`` pool environments closest to the persona by sentence embedding, closest first.

    A small selector model reading a list of 200 names mostly picks from its top; showing it the
    environments nearest the persona keeps the choice relevant and the prompt short. ``size`` 0 (or one
    covering the pool) returns the whole pool in file order.
    """
    pool = load_pool()
    if size <= 0 or size >= len(pool):
        return pool

    vectors = encode_stored([f"{env.name}: {env.description}" for env in pool])
    similarity = vectors @ encode([persona])[0]
    return tuple(pool[i] for i in np.argsort(-similarity, kind="stable")[:size])


async def select_environments(client: ModelClient, persona: str, k: int, shortlist: int = 0) -> Selection:
    """Asks the selector for ``k`` environments from the pool; keeps only names that are in it.

    With ``shortlist`` > 0 the selector sees only that many environments, the ones closest to the
    persona (see :func:`shortlist_pool`); a shortlist no longer than ``k`` leaves nothing to choose, so
    the ``k`` nearest are taken and no call is made (the quick run: its selector call was ~8 s of the
    1.5B's time before any question could be written). When the model fails or names nothing usable,
    the selection is ``failed`` (the run records why) rather than silently falling back to arbitrary
    environments.
    """
    if 0 < shortlist <= k:
        nearest = list(await asyncio.to_thread(shortlist_pool, persona, k))
        return Selection(nearest, shortlist=[env.name for env in nearest], requested=k)
    # the embedding shortlist runs in a thread; without one, no thread hop just to read the pool
    shown = await asyncio.to_thread(shortlist_pool, persona, shortlist) if shortlist > 0 else load_pool()
    whole, by_name = _whole_pool()
    listed = [env.name for env in shown] if len(shown) < len(by_name) else []
    listing = whole if shown is load_pool() else pool_listing(shown)
    messages = load_prompt("select_environments").messages(pool=listing, persona=persona, k=k)
    chosen: list[Environment] = []
    unknown: list[str] = []

    def take(value: EnvironmentChoice) -> tuple[int, str | None]:
        strangers, repeats = [], 0
        for name in value.environments:
            env = by_name.get(name.strip().strip("-•* ").split(" (")[0].strip().lower())
            if env is None:
                strangers.append(name)
            elif env in chosen:
                repeats += 1
            elif len(chosen) < k:
                chosen.append(env)
        unknown.extend(strangers)
        problems = [f"not in the list: {', '.join(strangers[:5])}"] if strangers else []
        problems += ["repeated"] * bool(repeats)
        return len(chosen), "; ".join(problems) or None

    _, extra, error = await _ask_for(
        client, messages, lambda n: at_most(EnvironmentChoice, "environments", n + 2), k, take
    )
    if error is not None or not chosen:
        return Selection(chosen, unknown, status="failed", shortlist=listed, requested=k, extra_calls=extra,
                         error=error or "no selected name is in the environment pool")
    return Selection(chosen, unknown, shortlist=listed, requested=k, extra_calls=extra)


def ends_a_sentence(text: str) -> bool:
    """Whether ``text`` ends as a sentence does: ".", "?" or "!", then closing quotes or brackets."""
    return text.rstrip("\"')]").endswith((".", "?", "!"))


def complete_question(written: str) -> str | None:
    """The question as it is asked: whitespace collapsed, and one that the grammar cut off at
    :data:`QUESTION_MAX_CHARS` ("…What did you learn? Do you think you'll remember the") ends at its last
    complete sentence; None when nothing before the cut ends one, so it is asked for again.

    An agent asked a question that stops mid-sentence answers something nobody asked; in quick runs on the
    embedded 1.5B, 2 of 5 questions reached the cap.
    """
    text = " ".join(written.split())
    if len(written) < QUESTION_MAX_CHARS or ends_a_sentence(text):
        return text
    ends = list(_SENTENCE_END.finditer(text))
    return text[: ends[-1].end()] if ends else None


def first_question(text: str) -> str:
    """``text`` up to the end of its first question when more questions follow it ("…tell me about the most
    memorable event of the day? What was the most exciting part? How did you feel about the animals?" keeps
    the first), with what comes before it (the scene).

    The task specifications ask for one question per item; the embedded 1.5B writes several in one in
    20–35% of its items (docs/benchmarks.md#tried-not-kept), and a list of questions draws an answer that runs to the
    answer cap. A question followed by a plain instruction ("What do you do? Explain why.") is kept whole.
    """
    ends = list(_QUESTION_END.finditer(text))
    for end in ends[:-1]:  # only a question with another one after it
        if len(text[: end.end()].split()) >= MIN_QUESTION_WORDS:
            return text[: end.end()]
    return text


def without_trailing_note(text: str) -> str:
    """``text`` without a bracketed note after its last question ("…where did you grow up? (Community Garden,
    House Fire Evacuation)"): the writer's own annotation, mostly the settings it used, not said to the
    persona."""
    match = _TRAILING_NOTE.match(text)
    return match.group(1) if match else text


def question_as_asked(written: str) -> str | None:
    """The written question as the agent is asked it: :func:`complete_question`, then
    :func:`without_trailing_note` and :func:`first_question`; None when it cannot be asked."""
    text = complete_question(written)
    return None if text is None else first_question(without_trailing_note(text))


async def generate_questions(
    client: ModelClient, persona: str, task: Task, environments: list[Environment], n: int
) -> QuestionBatch:
    """Writes ``n`` questions for one task, each as :func:`question_as_asked` makes it (blank, repeated and
    unfinishable ones are dropped, missing ones asked for again)."""
    listing = "\n".join(f"- {env.name}: {env.description}" for env in environments)
    messages = load_prompt("generate_questions").messages(
        task=task.name,
        task_description=task.description,
        requirements=task.question_requirements,
        persona=persona,
        environments=listing,
        n=n,
    )
    seen: set[str] = set()
    questions: list[str] = []

    def take(value: QuestionList) -> tuple[int, str | None]:
        unusable, cut = 0, 0
        for written in value.questions:
            text = question_as_asked(written)
            if text is None:
                cut += 1
            elif not text or text.lower() in seen:
                unusable += 1
            elif len(questions) < n:
                seen.add(text.lower())
                questions.append(text)
        problems = [f"{unusable} blank or repeated"] * bool(unusable)
        problems += [f"{cut} cut off mid-sentence at {QUESTION_MAX_CHARS} characters"] * bool(cut)
        return len(questions), "; ".join(problems) or None

    _, extra, error = await _ask_for(client, messages, lambda k: at_most(QuestionList, "questions", k), n, take)
    if error is None and not questions:
        error = "the generator returned no usable question"
    return QuestionBatch(questions, error, requested=n, extra_calls=extra)
