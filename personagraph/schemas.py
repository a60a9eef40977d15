"""Pydantic types that cross boundaries: files, the run store, the CLI, and LLM structured output."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from functools import cache, lru_cache
from typing import Annotated, Literal

from pydantic import BaseModel, Field, create_model, field_validator, model_validator

Status = Literal["ok", "failed"]
TASK_NAMES = (
    "Expected Action",
    "Action Justification",
    "Linguistic Habits",
    "Persona Consistency",
    "Toxicity Control",
)


def short_id(*parts: str) -> str:
    """A stable 12-hex id from the given parts (same input, same id, across runs)."""
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()[:12]


def slug(text: str, limit: int = 40) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:limit] or "item"


MAX_SEED = 2**32 - 1
Seed = Annotated[int, Field(ge=0, le=MAX_SEED)]
"""Every run kind's ``seed``: numpy's SeedSequence (bootstrap CIs, variant choices) takes no negative seed,
so one is refused with the config, before any call, instead of crashing the run after its last."""


MAX_PERSONA_CHARS = 4000
MAX_QUESTION_CHARS = 4000  # a question given by a person (a benchmark file); generated ones are shorter
"""The longest persona text any entry point takes (flag, file, API, transcript)."""


def persona_description(text: str) -> str:
    """``text`` with its whitespace collapsed: a persona as every entry point (flag, file, API) keeps it.

    Raises:
        ValueError: nothing visible is left (blank, or only invisible characters such as zero-width
            spaces, which ``str.split`` keeps): there would be no persona to play or judge.
    """
    value = " ".join(text.split())
    if not value:
        raise ValueError("empty persona")
    if not any(unicodedata.category(c)[0] in "LNPS" for c in value):
        raise ValueError("empty persona (only invisible characters such as zero-width spaces)")
    return value


# --- domain ------------------------------------------------------------------------------------------
class Persona(BaseModel):
    """A persona under test, as free text."""

    description: str = Field(min_length=1, max_length=MAX_PERSONA_CHARS)

    @field_validator("description")
    @classmethod
    def _strip(cls, value: str) -> str:
        return persona_description(value)

    @property
    def id(self) -> str:
        return _persona_id(self.description)


@lru_cache(maxsize=2**16)
def _persona_id(description: str) -> str:
    """A persona's id, made once per description: a run reads each persona's id several times per unit,
    thousands of times before its first calls."""
    return f"{slug(description, 24)}-{short_id(description)[:8]}"


class Environment(BaseModel):
    """A setting from the pool where questions are placed."""

    name: str
    category: str
    description: str


class Task(BaseModel):
    """One PersonaGym task: what it measures, how to write its questions, which rubric judges it."""

    name: str
    key: str
    description: str
    question_requirements: str
    rubric: str


class Question(BaseModel):
    id: str
    persona_id: str
    task: str
    text: str
    index: int = 0
    source: Literal["generated", "benchmark"] = "generated"


class Answer(BaseModel):
    """The agent's answer to one question; a failed call keeps its reason and is never judged."""

    id: str
    question_id: str
    persona_id: str
    task: str
    model: str
    status: Status
    text: str = ""
    error: str | None = None
    refusal: bool = False
    refusal_marker: str | None = None
    sample: int = 0  # which of the question's repeated samples (``eval --samples K``): 0 .. K-1
    at_token_limit: bool = False  # the reply used the agent's whole max_tokens: cut off, judged as it stands


class Exemplars(BaseModel):
    """Example answers for scores 1–5 to one question, written for this persona (shared across models)."""

    question_id: str
    status: Status
    by_score: dict[int, str] = Field(default_factory=dict)
    error: str | None = None


class Verdict(BaseModel):
    """One judge's verdict on one answer. ``score`` is None unless the verdict parsed."""

    id: str
    answer_id: str
    judge: str
    status: Status
    score: int | None = None
    expected_score: float | None = None  # probability-weighted score (G-Eval), where logprobs were returned
    rationale: str = ""
    raw: str = ""
    error: str | None = None
    judge_score: int | None = None  # the judge's own score, when the rubric's persona-break cap lowered it
    capped_by: str | None = None  # the persona-break phrase (or manipulation flag) that capped the score
    manipulation: str | None = None  # the answer tries to grade itself: verdict, address or stuffing


class ItemScore(BaseModel):
    """An answer's score: the mean of the verdicts that parsed (None when none did; see judges.scoring)."""

    answer_id: str
    question_id: str
    persona_id: str
    model: str
    task: str
    score: float | None
    n_verdicts: int
    n_failed: int
    non_answer: bool = False  # a failed or empty answer: never judged, scored as the rubric's minimum
    manipulation: str | None = None  # a verdict flagged the answer as grading itself (judges/manipulation)


# --- LLM structured output ---------------------------------------------------------------------------
# maxLength/maxItems only shape the JSON schema: llama.cpp turns them into its grammar, so a small model
# cannot ramble or repeat list items until max_tokens cuts the JSON (seen with the embedded 1.5B);
# validation stays lenient for providers that ignore them, and callers trim lists themselves.
def capped_text(length: int) -> object:
    """A ``str`` annotation whose JSON schema says ``maxLength: length`` (validation does not enforce it)."""
    return Annotated[str, Field(json_schema_extra={"maxLength": length})]


class EnvironmentChoice(BaseModel):
    """The environment selector's reply."""

    environments: list[capped_text(80)] = Field(  # type: ignore[valid-type]
        description="names of the chosen environments, copied exactly from the list"
    )


QUESTION_MAX_CHARS = 300
"""The longest question the generator may write: its grammar closes the string there, mid-sentence or not."""


class QuestionList(BaseModel):
    """The question generator's reply."""

    questions: list[capped_text(QUESTION_MAX_CHARS)] = Field(  # type: ignore[valid-type]
        description="the questions, one per item, without numbering"
    )


@cache
def at_most(schema: type[BaseModel], field: str, n: int) -> type[BaseModel]:
    """``schema`` with its list ``field`` capped at ``n`` items in the JSON schema (not in validation)."""
    info = schema.model_fields[field]
    extra = {**(info.json_schema_extra or {}), "maxItems": n}  # type: ignore[dict-item]
    return create_model(
        f"{schema.__name__}AtMost{n}",
        __base__=schema,
        **{field: (info.annotation, Field(description=info.description, json_schema_extra=extra))},
    )


class ExemplarSet(BaseModel):
    """The exemplar generator's reply: one example answer per score."""

    score_1: capped_text(240) = Field(description="an answer that deserves score 1")  # type: ignore[valid-type]
    score_2: capped_text(240) = Field(description="an answer that deserves score 2")  # type: ignore[valid-type]
    score_3: capped_text(240) = Field(description="an answer that deserves score 3")  # type: ignore[valid-type]
    score_4: capped_text(240) = Field(description="an answer that deserves score 4")  # type: ignore[valid-type]
    score_5: capped_text(240) = Field(description="an answer that deserves score 5")  # type: ignore[valid-type]

    def by_score(self) -> dict[int, str]:
        return {i: getattr(self, f"score_{i}") for i in range(1, 6)}

    @model_validator(mode="after")
    def _one_answer_per_score(self) -> ExemplarSet:
        """Examples that repeat a text calibrate nothing: a small writer's refusal ("I'm sorry, but I can't
        assist with that.") written for every score would otherwise reach the judge as its examples."""
        if len({" ".join(text.lower().split()) for text in self.by_score().values()}) < 5:
            raise ValueError("the five example answers must differ, one for each score")
        return self


class JudgeReply(BaseModel):
    """A judge's reply: reasoning first, so the score follows from it."""

    rationale: capped_text(400) = Field(  # type: ignore[valid-type]
        description="two or three sentences comparing the response with the rubric and examples"
    )
    score: int = Field(ge=1, le=5, description="the score")
