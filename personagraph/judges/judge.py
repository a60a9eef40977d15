"""Reasoning exemplars and the judge: PersonaGym steps 4 and 5, one answer per judge call."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from pydantic import BaseModel

from personagraph.errors import PersonagraphError
from personagraph.judges.features import Text, acompute
from personagraph.judges.features import prepare as prepare_features
from personagraph.judges.features import require as require_features
from personagraph.judges.manipulation import copies_answer, detect_manipulation
from personagraph.judges.protocols import (
    TOP_LOGPROBS,
    Check,
    EvidenceModel,
    Protocol,
    asked_checks,
    check_probabilities,
    checklist_schema,
    checklist_score,
    checklist_text,
    evidence_features,
    evidence_model,
    expected_score,
    fence,
    gate_share,
    get_protocol,
    grounding_model,
    persona_facts,
    persona_text,
    read_gates,
    recent_dialogue,
    score_schema,
    stated_good,
    text_checks,
)
from personagraph.judges.refusal import detect_refusal
from personagraph.judges.rubrics import Rubric, load_rubric
from personagraph.models import ModelClient
from personagraph.models.client import Structured
from personagraph.prompts import load_prompt
from personagraph.schemas import (
    Answer,
    Exemplars,
    ExemplarSet,
    Question,
    Status,
    Task,
    Verdict,
    short_id,
)

T = TypeVar("T")


def ready_protocol(name: str | None, judge: str) -> Protocol:
    """:func:`get_protocol`, checked to run here: a weighed protocol's fitted models may read the
    likelihood features, which need the embedded 1.5B — one line saying so before anything is judged, not
    a failure at the first verdict."""
    protocol = get_protocol(name, judge)
    if protocol.weighed:
        require_features(evidence_features())  # reads evidence.yaml: a broken one is one line, now
        prepare_features(evidence_features())  # the engine loads while the run's first stages work
    return protocol


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
    """A judge's reading of one response: ``score`` is None unless the reply parsed.

    ``expected`` is the probability-weighted score (None without log-probabilities).
    """

    status: Status
    score: int | None
    rationale: str
    raw: str
    error: str | None
    expected: float | None = None
    judge_score: int | None = None  # the judge's own score, when a rule after judging lowered it
    capped_by: str | None = None  # the phrase that made the rule apply
    manipulation: str | None = None  # the kind of judge manipulation the response holds (judges/manipulation)
    inputs: dict[str, float | None] = field(default_factory=dict)  # checks' P(good), text features read
    cached: bool = False  # the judge's call was a cache hit (benches time the calls sent, not these)

    def verdict_fields(self) -> dict[str, Any]:
        """The fields every verdict record (eval, meta-eval, judge-check) takes from a reading."""
        return {"status": self.status, "score": self.score, "expected_score": self.expected,
                "rationale": self.rationale, "raw": self.raw, "error": self.error,
                "judge_score": self.judge_score, "capped_by": self.capped_by,
                "manipulation": self.manipulation}


def capped(scored: Scored, highest: int | None, reason: str) -> Scored:
    """``scored`` with its score at most ``highest`` (None: unchanged): the integer score is lowered to it,
    with the judge's own score and ``reason`` kept beside it, and the probability-weighted score too."""
    if highest is None or scored.score is None:
        return scored
    expected = None if scored.expected is None else min(scored.expected, float(highest))
    if scored.score <= highest:
        return replace(scored, expected=expected)
    return replace(scored, score=highest, expected=expected, judge_score=scored.score, capped_by=reason)


def cap_persona_break(scored: Scored, rubric: Rubric, marker: str | None) -> Scored:
    """An answer that breaks persona (``marker``: the phrase :func:`detect_refusal` found, or any label
    when the answer is flagged otherwise; None: it does not) scores at most the rubric's ``break_cap``, as
    its guidance says: ``eval``, the evaluators and the session turns all cap here."""
    return capped(scored, rubric.break_cap if marker else None, marker or "")


async def score_response(
    client: ModelClient,
    rubric: Rubric,
    *,
    persona: str,
    question: str,
    response: str,
    examples: str | None = None,
    protocol: Protocol | str | None = None,
) -> Scored:
    """Scores one response against one rubric: the single judge call every judging path uses.

    ``protocol`` (a :class:`Protocol` or its name) says how the judge is asked; None picks the default
    for this judge (:func:`get_protocol`). A reply that does not parse (after the model layer's one
    format retry) is ``failed`` with its raw text: missing from any mean, never a 0.

    A response that tries to grade itself (a planted verdict, words to the judge, the persona's words
    stuffed in: :func:`~personagraph.judges.manipulation.detect_manipulation`) scores the rubric's
    minimum, with the judge's own score kept and the flag recorded: the prompt fences the response as
    data, but the embedded 1.5B judge still obeyed or copied such text. A rationale that copies the
    response's words is the response's verdict, not the judge's: the verdict fails with that reason.
    """
    scored = await _read_judge(client, rubric, persona=persona, question=question, response=response,
                               examples=examples, protocol=protocol)
    if scored.status == "ok" and (copied := copies_answer(scored.rationale, response)) is not None:
        return replace(scored, status="failed", score=None, expected=None, judge_score=None,
                       error=f"the judge's rationale copies the response's words ({copied[:80]!r}): "
                             "not a verdict of its own")
    flag = detect_manipulation(response, persona)
    if flag is None:
        return scored
    return capped(replace(scored, manipulation=flag.kind), rubric.scale[0], str(flag))


async def _read_judge(
    client: ModelClient,
    rubric: Rubric,
    *,
    persona: str,
    question: str,
    response: str,
    examples: str | None,
    protocol: Protocol | str | None,
) -> Scored:
    """The judge's own reading of a response under ``protocol``: one structured call, none where every
    check the rubric's fitted model reads is read from the text."""
    if not isinstance(protocol, Protocol):
        protocol = get_protocol(protocol, client.name)
    checks = asked_checks(protocol, rubric)
    model = evidence_model(rubric) if protocol.weighed else None
    if protocol.reply == "checklist" and not checks and model is None:
        protocol = get_protocol("facts", client.name)
    if not protocol.exemplars:
        examples = None  # judged as the protocol was measured (see protocols.PROTOCOLS)
    if protocol.dialogue_lines and question:
        question = recent_dialogue(question, protocol.dialogue_lines)
    messages = load_prompt(protocol.prompt).messages(
        task=rubric.task,
        rubric=rubric.text(),
        persona=fence("PERSONA", persona_text(protocol, persona or "(not given)")),
        question=fence("QUESTION", question or "(not given)"),
        exemplars=(fence("EXAMPLES", examples) if examples
                   else "(no examples available: rely on the rubric alone)"),
        answer=fence("RESPONSE", response),
        low=rubric.scale[0],
        high=rubric.scale[1],
        checklist=checklist_text(checks),
    )
    if checks or model is not None:
        facts = len(persona_facts(persona or "(not given)"))
        text = Text(persona=persona or "", question=question or "", response=response)
        schema = checklist_schema(checks, facts)
        # What the verdict reads from the response is asked beside the judge call, not after it: the
        # engine batches them, and a verdict waits for the slower one instead of both in turn.
        reply, read, values = await asyncio.gather(
            client.structured(messages, schema, top_logprobs=TOP_LOGPROBS) if checks else _not_asked(schema),
            _settled(_read_text_checks(text_checks(protocol, rubric), text)),
            _settled(_features(model, text)))
        if not reply.ok or reply.value is None:
            return Scored("failed", None, "", reply.raw, reply.error)
        if isinstance(read, PersonagraphError):
            return Scored("failed", None, "", reply.raw, f"text features: {read}")
        read = [*read, *_read_gates(read_gates(protocol, rubric), response)]
        answers = reply.value.model_dump()
        score, expected, good = checklist_score(checks, answers, reply.logprobs, rubric.scale, facts, read)
        said = [f"{key}: {value}" + ("" if p is None else f" (P good {p:.2f})")
                for (key, value), p in zip(answers.items(), good[:len(checks)], strict=True)]
        said += [f"{check.name} (read from the text): P good {p:.2f}" for check, p in read]
        inputs: dict[str, float | None] = dict(check_probabilities([*checks, *(c for c, _ in read)], good))
        if model is not None:
            if isinstance(values, PersonagraphError):  # the engine could not score the text
                return Scored("failed", None, "", reply.raw, f"likelihood features: {values}")
            every = [*checks, *(check for check, _ in read)]
            stated = [*stated_good(checks, answers), *(float(p >= 0.5) for _, p in read)]
            score, expected, weighed = _weigh(model, every, stated, good, values, rubric.scale)
            said.append("evidence: " + ", ".join(f"{k} {v:.2f}" for k, v in weighed.items()))
            inputs.update(weighed)
        return Scored("ok", score, "; ".join(said), reply.raw, None, expected, inputs=inputs,
                      cached=reply.cached)
    schema = score_schema(*rubric.scale, with_rationale=protocol.reply == "rationale")
    reply = await client.structured(messages, schema, top_logprobs=TOP_LOGPROBS)
    if not reply.ok or reply.value is None:
        return Scored("failed", None, "", reply.raw, reply.error)
    value = reply.value.model_dump()
    rationale = str(value.get("rationale", "")).strip()
    expected = expected_score(reply.logprobs, rubric.scale)
    return Scored("ok", int(value["score"]), rationale, reply.raw, None, expected, cached=reply.cached)


async def _settled(reading: Awaitable[T]) -> T | PersonagraphError:
    """The reading's value, or the error it failed with: a reading that fails makes a failed verdict,
    after the judge call beside it has ended."""
    try:
        return await reading
    except PersonagraphError as exc:
        return exc


async def _features(model: EvidenceModel | None, text: Text) -> dict[str, float]:
    """The text features ``model`` reads (the likelihood ones from the embedded model's engine); none
    without a model."""
    if model is None:
        return {}
    features = await acompute(model.features, [text])
    return {name: column[0] for name, column in features.items()}


async def _not_asked(schema: type[BaseModel]) -> Structured[Any]:
    """The reply of a verdict that asks the judge nothing: every check it reads is read from the text."""
    return Structured("ok", value=schema())


def _read_gates(gates: tuple[Check, ...], response: str) -> list[tuple[Check, float]]:
    """Each gate with its P(good) read by the persona-break markers: 0 where one matches, else 1."""
    broken = detect_refusal(response) is not None
    return [(gate, 0.0 if broken else 1.0) for gate in gates]


async def _read_text_checks(checks: tuple[Check, ...], text: Text) -> list[tuple[Check, float]]:
    """Each check read from the response with its P(good): the grounding model's share for an ``answer:
    text`` check, the embedded model's character-fit answer for an ``answer: fit`` one."""
    if not checks:
        return []
    model = grounding_model()
    reads_text = model is not None and any(c.answer == "text" for c in checks)
    names = set(model.features) if reads_text and model is not None else set()
    if any(c.answer == "fit" for c in checks):
        names.add("character_fit")
    values = {name: column[0] for name, column in (await acompute(sorted(names), [text])).items()}
    grounded = model.share(values) if reads_text and model is not None else None
    return [(check, values["character_fit"] if check.answer == "fit" else grounded) for check in checks]


def _weigh(
    model: EvidenceModel, checks: list[Check], stated: list[float], good: list[float | None],
    values: dict[str, float], scale: tuple[int, int],
) -> tuple[int, float | None, dict[str, float]]:
    """The ``evidence`` score: the fitted model over the checks' P(good) and the text features' ``values``,
    times what the gates leave of it (:func:`gate_share`). The integer score reads the stated answers (1/0)
    where the expected one reads probabilities; without log-probabilities only the integer score exists.
    Returns both and the inputs read."""
    low, high = scale
    read = {**values, **check_probabilities(checks, stated)}
    integer = low + round((high - low) * model.share(read) * gate_share(checks, stated))
    if any(p is None for p in good):
        return integer, None, read
    inputs = {**values, **check_probabilities(checks, good)}
    expected = low + (high - low) * model.share(inputs) * gate_share(checks, good)  # type: ignore[arg-type]
    return integer, expected, inputs  # type: ignore[return-value]


async def judge_answer(
    client: ModelClient,
    persona: str,
    task: Task,
    question: Question,
    answer: Answer,
    exemplars: Exemplars | None,
    protocol: Protocol | str | None = None,
) -> Verdict:
    """PersonaGym step 5 for one answer and one judge: the task's rubric plus the exemplars.

    An answer flagged as a persona break ("As an AI…") scores at most the rubric's ``break_cap``, as its
    guidance says; the judge's own score is kept beside the capped one.
    """
    rubric = load_rubric(task.rubric)
    scored = await score_response(
        client, rubric, persona=persona, question=question.text, response=answer.text,
        examples=exemplar_text(exemplars) if exemplars is not None and exemplars.status == "ok" else None,
        protocol=protocol,
    )
    scored = cap_persona_break(scored, rubric, (answer.refusal_marker or "persona break") if answer.refusal
                               else None)
    return Verdict(id=short_id(answer.id, client.name), answer_id=answer.id, judge=client.name,
                   **scored.verdict_fields())
