"""Reasoning exemplars and the judge: PersonaGym steps 4 and 5, one answer per judge call."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from pydantic import BaseModel, Field, create_model

from personagraph.judges.rubrics import Rubric, load_rubric
from personagraph.models import ModelClient
from personagraph.prompts import load_prompt
from personagraph.schemas import (
    Answer,
    Exemplars,
    ExemplarSet,
    JudgeReply,
    Question,
    Status,
    Task,
    Verdict,
    short_id,
)


async def write_exemplars(client: ModelClient, persona: str, task: Task, question: Question) -> Exemplars:
    """One example answer per score 1–5 for this persona and question (shared by every model under test)."""
    messages = load_prompt("exemplars").messages(
        task=task.name, rubric=load_rubric(task.rubric).text(), persona=persona, question=question.text
    )
    reply = await client.structured(messages, ExemplarSet)
    if not reply.ok or reply.value is None:
        return Exemplars(question_id=question.id, status="failed", error=reply.error)
    return Exemplars(question_id=question.id, status="ok", by_score=reply.value.by_score())


def exemplar_text(exemplars: Exemplars) -> str:
    """The exemplars as the judge reads them."""
    return "\n".join(f"Score {score}: {text}" for score, text in sorted(exemplars.by_score.items()))


@dataclass(frozen=True)
class Scored:
    """A judge's reading of one response: ``score`` is None unless the reply parsed."""

    status: Status
    score: int | None
    rationale: str
    raw: str
    error: str | None


@lru_cache(maxsize=None)
def reply_schema(low: int, high: int) -> type[BaseModel]:
    """The judge's structured reply for a ``low``..``high`` scale (rationale first, then the score)."""
    if (low, high) == (1, 5):
        return JudgeReply
    return create_model(
        f"JudgeReply{low}to{high}",
        rationale=(str, JudgeReply.model_fields["rationale"]),
        score=(int, Field(ge=low, le=high, description="the score")),
    )


async def score_response(
    client: ModelClient,
    rubric: Rubric,
    *,
    persona: str,
    question: str,
    response: str,
    examples: str | None = None,
) -> Scored:
    """Scores one response against one rubric: the single judge call every judging path uses.

    A reply that does not parse (after the model layer's one format retry) is ``failed`` with its raw
    text: missing from any mean, never a 0.
    """
    messages = load_prompt("judge").messages(
        task=rubric.task,
        rubric=rubric.text(),
        persona=persona or "(not given)",
        question=question or "(not given)",
        exemplars=examples or "(no examples available: rely on the rubric alone)",
        answer=response,
        low=rubric.scale[0],
        high=rubric.scale[1],
    )
    reply = await client.structured(messages, reply_schema(*rubric.scale))
    if not reply.ok or reply.value is None:
        return Scored("failed", None, "", reply.raw, reply.error)
    value = reply.value
    return Scored("ok", int(value.score), str(value.rationale).strip(), reply.raw, None)  # type: ignore[attr-defined]


async def judge_answer(
    client: ModelClient,
    persona: str,
    task: Task,
    question: Question,
    answer: Answer,
    exemplars: Exemplars | None,
) -> Verdict:
    """PersonaGym step 5 for one answer and one judge: the task's rubric plus the exemplars.

    An answer flagged as a persona break ("As an AI…") scores at most the rubric's ``break_cap``, as its
    guidance says; the judge's own score is kept beside the capped one.
    """
    rubric = load_rubric(task.rubric)
    scored = await score_response(
        client, rubric, persona=persona, question=question.text, response=answer.text,
        examples=exemplar_text(exemplars) if exemplars is not None and exemplars.status == "ok" else None,
    )
    verdict = Verdict(
        id=short_id(answer.id, str(client.spec)),
        answer_id=answer.id,
        judge=str(client.spec),
        status=scored.status,
        score=scored.score,
        rationale=scored.rationale,
        raw=scored.raw,
        error=scored.error,
    )
    cap = rubric.break_cap
    if answer.refusal and cap is not None and verdict.score is not None and verdict.score > cap:
        verdict.judge_score, verdict.score = verdict.score, cap
        verdict.capped_by = answer.refusal_marker or "persona break"
    return verdict
