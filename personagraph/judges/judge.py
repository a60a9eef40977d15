"""Reasoning exemplars and the judge: PersonaGym steps 4 and 5, one answer per judge call."""

from __future__ import annotations

from personagraph.judges.rubrics import load_rubric
from personagraph.models import ModelClient
from personagraph.prompts import load_prompt
from personagraph.schemas import Answer, Exemplars, ExemplarSet, JudgeReply, Question, Task, Verdict, short_id


async def write_exemplars(client: ModelClient, persona: str, task: Task, question: Question) -> Exemplars:
    """One example answer per score 1–5 for this persona and question (shared by every model under test)."""
    messages = load_prompt("exemplars").messages(
        task=task.name, rubric=load_rubric(task.rubric).text(), persona=persona, question=question.text
    )
    reply = await client.structured(messages, ExemplarSet)
    if not reply.ok or reply.value is None:
        return Exemplars(question_id=question.id, status="failed", error=reply.error)
    return Exemplars(question_id=question.id, status="ok", by_score=reply.value.by_score())


def exemplar_text(exemplars: Exemplars | None) -> str:
    if exemplars is None or exemplars.status != "ok":
        return "(no examples available: rely on the rubric alone)"
    return "\n".join(f"Score {score}: {text}" for score, text in sorted(exemplars.by_score.items()))


async def judge_answer(
    client: ModelClient,
    persona: str,
    task: Task,
    question: Question,
    answer: Answer,
    exemplars: Exemplars | None,
) -> Verdict:
    """Scores one answer with the task's rubric and the exemplars.

    A reply that does not parse (after the model layer's one format retry) is a failed verdict with
    its raw text: it is missing from the item's mean, never a 0.
    """
    rubric = load_rubric(task.rubric)
    messages = load_prompt("judge").messages(
        task=task.name,
        rubric=rubric.text(),
        persona=persona,
        question=question.text,
        exemplars=exemplar_text(exemplars),
        answer=answer.text,
    )
    verdict_id = short_id(answer.id, str(client.spec))
    reply = await client.structured(messages, JudgeReply)
    if not reply.ok or reply.value is None:
        return Verdict(id=verdict_id, answer_id=answer.id, judge=str(client.spec), status="failed",
                       raw=reply.raw, error=reply.error)
    return Verdict(
        id=verdict_id,
        answer_id=answer.id,
        judge=str(client.spec),
        status="ok",
        score=reply.value.score,
        rationale=reply.value.rationale.strip(),
        raw=reply.raw,
    )
