"""PersoBench: personalized response generation from persona sentences + dialogue context, then scoring.

Data: a CSV with columns ``personas, context, act_response`` (PersoBench's prompt files). Each row is
answered by the model under test as JSON — ``{"response": …}`` (vanilla) or ``{"reasoning": …,
"response": …}`` (chain of thought, reasoning first) — through the model layer, which applies the model's
chat template. A reply that cannot be parsed, or an empty response, is a failure: it counts in the failure
ratio and is kept out of the quality means. Every finished generation is stored at once, so a run resumes
by skipping what its run directory already holds.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from personagraph.errors import PersonagraphError
from personagraph.metrics.io import read_table
from personagraph.metrics.scoring import ScoreConfig
from personagraph.metrics.text import persona_sentences
from personagraph.models import ModelClient
from personagraph.prompts import load_prompt

COLUMNS = ("personas", "context", "act_response")
KIND = "persobench"
Mode = Literal["vanilla", "cot"]


class PersoBenchItem(BaseModel):
    """One PersoBench row.

    Attributes:
        id: the row number in the file (1 = first data row), as a string.
        persona: the persona sentences.
        context: the dialogue so far (literal ``\\n`` sequences turned into line breaks).
        act_response: the reference (actual) response.
    """

    id: str
    persona: list[str]
    context: str
    act_response: str


def load_persobench(path: str | Path, limit: int | None = None) -> list[PersoBenchItem]:
    """Reads a PersoBench CSV (``personas, context, act_response``).

    Args:
        path: the CSV file.
        limit: keep only the first ``limit`` rows.

    Raises:
        PersonagraphError: missing file or column, empty file, a row with an empty cell (file and row named).
    """
    items = []
    for number, row in read_table(path, COLUMNS, delimiter=","):
        for column in COLUMNS:
            if not row[column].strip():
                raise PersonagraphError(f"{path} row {number}: empty {column!r}")
        persona = persona_sentences(row["personas"])
        if not persona:
            raise PersonagraphError(f"{path} row {number}: no persona sentence in 'personas'")
        context = row["context"].replace("\\n", "\n").strip()
        items.append(PersoBenchItem(id=str(number), persona=persona, context=context,
                                    act_response=row["act_response"].strip()))
        if limit is not None and len(items) >= limit:
            break
    return items


class VanillaReply(BaseModel):
    """The vanilla reply format."""

    response: str = Field(description="your next reply in the conversation")


class CoTReply(BaseModel):
    """The chain-of-thought reply format: reasoning first, then the response."""

    reasoning: str = Field(description="your brief step-by-step reasoning about what to reply")
    response: str = Field(description="your next reply in the conversation")


def persobench_messages(item: PersoBenchItem, mode: Mode) -> list[dict[str, str]]:
    """The chat messages asking for the next turn (``persobench_vanilla`` / ``persobench_cot`` prompt)."""
    persona = "\n".join(f"- {sentence}" for sentence in item.persona)
    return load_prompt(f"persobench_{mode}").messages(persona=persona, context=item.context)


class Generation(BaseModel):
    """One finished generation, as stored.

    Attributes:
        id: the item id.
        model: the model spec.
        mode: ``vanilla`` or ``cot``.
        response: the parsed response; None when the reply could not be parsed.
        reasoning: the chain-of-thought reasoning (cot only).
        raw: the model's text as received.
        error: why parsing failed, if it did.
        response_time_s: wall time of the call (0 when answered from the cache).
        cached: whether the call was answered from the run's response cache.
    """

    id: str
    model: str
    mode: Mode
    response: str | None
    reasoning: str | None = None
    raw: str = ""
    error: str | None = None
    response_time_s: float
    cached: bool = False


class CallFailed(Exception):
    """The model call itself failed (endpoint down, timeout): nothing to score; retried on resume."""


async def generate(item: PersoBenchItem, client: ModelClient, mode: Mode) -> Generation:
    """Asks the model for the next turn of one item.

    Raises:
        CallFailed: when the call failed before any reply arrived (not a model failure: not stored).
    """
    schema: type[BaseModel] = CoTReply if mode == "cot" else VanillaReply
    started = time.perf_counter()
    result = await client.structured(persobench_messages(item, mode), schema)
    elapsed = time.perf_counter() - started
    if not result.ok and not (result.error or "").startswith("invalid structured output"):
        raise CallFailed(result.error or "the model call failed")
    value = result.value
    return Generation(
        id=item.id, model=client.name, mode=mode,
        response=getattr(value, "response", None) if result.ok else None,
        reasoning=getattr(value, "reasoning", None) if result.ok else None,
        raw=result.raw, error=None if result.ok else result.error,
        response_time_s=0.0 if result.cached else elapsed, cached=result.cached,
    )


class PersoBenchConfig(BaseModel):
    """A PersoBench run.

    Attributes:
        data: the CSV file.
        model: model spec under test.
        cot: chain-of-thought prompting instead of vanilla.
        limit: only the first N rows.
        score: metrics and the models that compute them.
        max_tokens: generation limit per reply.
        temperature: sampling temperature.
        retry_failed: a resumed run asks the items whose call failed again (False keeps them failed).
    """

    data: Path
    model: str
    cot: bool = False
    limit: int | None = Field(None, ge=1)
    score: ScoreConfig = Field(default_factory=ScoreConfig)
    max_tokens: int = Field(256, ge=1)
    temperature: float = Field(0.0, ge=0.0, le=2.0)
    retry_failed: bool = True

    @property
    def mode(self) -> Mode:
        return "cot" if self.cot else "vanilla"

    @property
    def unit(self) -> str:
        """The store unit of this model × mode (one run directory can hold several)."""
        return f"{self.model}|{self.mode}"
