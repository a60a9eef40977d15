"""Judging protocols: how a judge is asked for its score, and how its reply becomes one.

A protocol is data (a prompt in ``personagraph/prompts/``, a reply kind and, for checklists,
``judges/checklists.yaml``) plus the small code here. Every protocol asks for the token
log-probabilities of the reply: where the provider returns them, the verdict keeps a probability-weighted
score (G-Eval: Σ p(s)·s over the scale's tokens at the score position, renormalised over the scale)
beside the integer one.

* ``rationale`` — a short rationale, then the score (the protocol of earlier versions).
* ``score`` — the score alone: no rationale for a small model to talk itself into a score with.
* ``facts`` — the persona restated as numbered facts, then the score alone.
* ``evidence`` (the embedded judges' default) — for a rubric with a fitted model (Persona Consistency):
  evidence read from the text and the judge's own model (``judges/features.py``: persona words the
  response states, its best sentence-to-fact MiniLM cosine, repetition, and how much the persona and the
  dialogue raise the model's likelihood of the response) weighed by a logistic model fitted on graded
  human ratings (``judges/evidence.yaml``, written by ``bench/fit_evidence.py``), the judge asked only the
  checks that model reads (the packaged one reads none: no call), its gates read by the persona-break markers
  (:func:`read_gates`). A rubric without fitted weights is scored by the ``checklist`` call and rule, whose
  ``answer: text`` checks read the text-only grounding model and ``answer: fit`` checks the model's
  character-fit answer instead of asking. Gates (an AI disclosure) take the score to the minimum.

Untrusted text (persona, question, examples, response) goes into :func:`fence`d blocks that it cannot
close, and the prompts say that text inside them is data.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from personagraph.errors import PersonagraphError
from personagraph.judges.manipulation import FILE as MANIPULATION_FILE
from personagraph.judges.refusal import MARKERS_FILE
from personagraph.judges.rubrics import Rubric
from personagraph.likelihood import MAX_CONTINUATION
from personagraph.models.openai_http import TokenLogprobs
from personagraph.prompts import load_prompt
from personagraph.resources import data_hash, read_yaml
from personagraph.schemas import JudgeReply

TOP_LOGPROBS = 10  # alternatives per token: enough to hold every score of a 1–5 or 1–9 scale
ReplyKind = Literal["rationale", "score", "checklist"]
EVIDENCE_FILE = "judges/evidence.yaml"


DIALOGUE_LINES = 8
"""Lines of a dialogue the embedded judge and its text features read, the last ones: the response answers
them, and a long role-play (CharacterBench runs to 16k characters) would otherwise crowd the persona out
of a small model's context and cost its prompt time."""


def recent_dialogue(question: str, lines: int = DIALOGUE_LINES) -> str:
    """The question's last ``lines`` non-empty lines, after a "…" line where earlier ones are left out."""
    kept = [line for line in question.splitlines() if line.strip()]
    return question if len(kept) <= lines else "\n".join(["…", *kept[-lines:]])


@dataclass(frozen=True)
class Protocol:
    """One way of asking a judge: the prompt, what the reply holds, whether the persona is numbered."""

    name: str
    prompt: str  # personagraph/prompts/<prompt>.yaml
    reply: ReplyKind
    numbered_persona: bool
    description: str
    exemplars: bool  # whether the judge reads PersonaGym's exemplars (see PROTOCOLS)
    weighed: bool = False  # the checklist's answers and text evidence combined by judges/evidence.yaml
    dialogue_lines: int | None = None  # of a long dialogue, the last lines the judge reads (None: all)

    @property
    def version(self) -> str:
        """Identifies what the judge is asked and how its reply is scored (hashed into verdict ids and run
        metadata): the prompt, the words that flag an answer grading itself (its score is capped), the
        checklists and, for ``evidence``, the fitted weights, the reply tokens its likelihoods read and the
        persona-break markers its fitted models' gates read."""
        extra = f"-m{data_hash(MANIPULATION_FILE)}"
        extra += f"-{data_hash(CHECKLISTS_FILE)}" if self.reply == "checklist" else ""
        if self.weighed:
            fit = load_prompt("character_fit").version
            extra += f"-{data_hash(EVIDENCE_FILE)}-{fit}-t{MAX_CONTINUATION}-{data_hash(MARKERS_FILE)}"
        extra += f"-last{self.dialogue_lines}" if self.dialogue_lines else ""
        return f"{self.name}-{load_prompt(self.prompt).version}{extra}"


# Exemplars: "rationale" is PersonaGym's judge, which reads the generated example answers per score. The
# other protocols are judged without them (the score and facts prompts say "no examples available", the
# checklist prompt has no examples section), so an eval whose judges all use them writes no exemplars:
# with the embedded 1.5B as writer they were poor anchors and the quick run's largest cost.
PROTOCOLS: dict[str, Protocol] = {
    p.name: p
    for p in (
        Protocol("rationale", "judge", "rationale", False, "a short rationale, then the score (the old way)",
                 exemplars=True),
        Protocol("score", "judge_score", "score", False, "the score alone", exemplars=False),
        Protocol("facts", "judge_facts", "score", True, "the persona as numbered facts, then the score only",
                 exemplars=False),
        Protocol("evidence", "judge_checklist", "checklist", True,
                 "the checklist's answers and text evidence weighed by a model fitted on graded ratings",
                 exemplars=False, weighed=True, dialogue_lines=DIALOGUE_LINES),
    )
}
# How a judge is asked when no protocol is named. A judge that is a model the user chose (``openai:``) is
# asked PersonaGym's way, so that its own reading of the rubric makes the score: a rationale, then the
# score, with exemplars, probability-weighted where the endpoint returns log-probabilities. Nothing local
# stands in for it, and nothing local runs beside it. The embedded judges (``local:``), a weak model for an
# offline smoke test, are asked with ``evidence``. Figures: docs/benchmarks.md#judge-protocols.
EMBEDDED_PROTOCOL = "evidence"
API_PROTOCOL = "rationale"
SCRIPTED_PROTOCOL = "rationale"  # what the deterministic test judges (test:, scripts:) are written to answer


def default_protocol(judge: str) -> str:
    """The protocol a judge (a model spec) is asked with when none is named."""
    provider = judge.partition(":")[0].partition("@")[0]  # openai@endpoint:model too
    return {"local": EMBEDDED_PROTOCOL, "openai": API_PROTOCOL}.get(provider, SCRIPTED_PROTOCOL)


def get_protocol(name: str | None, judge: str) -> Protocol:
    """The protocol ``name``, or the default for ``judge`` (a model spec) when ``name`` is None.

    Raises:
        PersonagraphError: for an unknown name (one line listing the known ones).
    """
    if name is None:
        name = default_protocol(judge)
    try:
        return PROTOCOLS[name]
    except KeyError:
        raise PersonagraphError(
            f"--judge-protocol {name!r}: unknown; choose one of {', '.join(PROTOCOLS)}"
        ) from None


def evidence_features() -> set[str]:
    """Every text feature the fitted models and the grounding model read."""
    grounding = grounding_model()
    return ({name for model in _evidence_models().values() for name in model.features}
            | set(grounding.features if grounding else ()))


def reads_exemplars(name: str | None, judges: Sequence[str]) -> bool:
    """Whether any of ``judges`` (names or specs), asked under protocol ``name``, reads exemplars: an eval
    writes them only then."""
    return any(get_protocol(name, judge).exemplars for judge in judges)


# --- untrusted text -------------------------------------------------------------------------------
def fence(label: str, text: str) -> str:
    """``text`` between ``[BEGIN label #tag]`` and ``[END label #tag]`` lines it cannot close.

    The tag is drawn from a hash of the text and re-drawn until the text does not contain it, so an
    answer cannot forge the end of its own block; it is deterministic, so cache keys stay stable.
    """
    tag = hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]
    while tag in text:
        tag = hashlib.sha256(tag.encode()).hexdigest()[:8]
    return f"[BEGIN {label} #{tag}]\n{text}\n[END {label} #{tag}]"


_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n+")


def persona_facts(persona: str) -> list[str]:
    """The persona split into sentences (the facts a ``numbered_persona`` protocol lists)."""
    facts = [s.strip(" -•*\t") for s in _SENTENCE.split(persona.strip())]
    return [f for f in facts if f] or [persona.strip() or "(not given)"]


def persona_text(protocol: Protocol, persona: str) -> str:
    """The persona as the protocol shows it: verbatim, or one numbered fact per line."""
    if not protocol.numbered_persona:
        return persona
    return "\n".join(f"{i}. {fact}" for i, fact in enumerate(persona_facts(persona), start=1))


# --- reply schemas --------------------------------------------------------------------------------
class Check(BaseModel):
    """One question of a rubric's checklist.

    ``answer`` "yes_no": ``good`` is the answer a good response gets. ``answer`` "fact": the judge names
    the number of the persona fact the response shows, or 0 for none; any fact is good. Naming a number
    makes a small judge look the facts up, where a yes/no question lets it answer by habit (the persona-
    swap dev set: bench/judge_protocols.py). ``answer`` "text": never asked; under ``evidence`` its P(good)
    is the grounding model's reading of the response text (:func:`grounding_model`). ``answer`` "fit": never
    asked either; under ``evidence`` its P(good) is the
    embedded model's P(Yes) that the character the persona describes could say the response
    (``features.character_fit``, ``prompts/character_fit.yaml``). A ``gate`` is not weighed in: a bad
    answer to it takes the score to the rubric's minimum (an AI disclosure is no persona answer however
    well it reads).
    """

    model_config = ConfigDict(frozen=True)  # hashable: the reply schema is cached per checklist

    question: str
    name: str = ""  # how judges/evidence.yaml names this check's P(good) ("check:<name>")
    answer: Literal["yes_no", "fact", "text", "fit"] = "yes_no"
    good: Literal["yes", "no"] = "yes"
    weight: float = Field(1.0, gt=0)
    gate: bool = False


CHECKLISTS_FILE = "judges/checklists.yaml"
READ_ANSWERS = ("text", "fit")  # checks read from the response by the evidence protocol, never asked


@lru_cache(maxsize=1)
def _checklists() -> dict[str, tuple[Check, ...]]:
    data = read_yaml(CHECKLISTS_FILE)
    out = {}
    for task, checks in (data or {}).items():
        try:
            out[str(task)] = tuple(Check.model_validate(c) for c in checks)
        except (ValidationError, TypeError) as exc:
            message = f"personagraph/{CHECKLISTS_FILE}: {task}: {exc}".splitlines()[0]
            raise PersonagraphError(message) from None
        if any(c.answer in READ_ANSWERS and (c.gate or not c.name) for c in out[str(task)]):
            raise PersonagraphError(f"personagraph/{CHECKLISTS_FILE}: {task}: a check read, not asked "
                                    "(answer: text or fit), needs a name and cannot be a gate")
    return out


def checklist(rubric: Rubric) -> tuple[Check, ...]:
    """The rubric's checklist (by task name), empty when it has none."""
    return _checklists().get(rubric.task, ())


@cache
def score_schema(low: int, high: int, with_rationale: bool) -> type[BaseModel]:
    """``{"rationale"?, "score"}`` for a ``low``..``high`` scale (rationale first: the score follows it)."""
    if with_rationale and (low, high) == (1, 5):
        return JudgeReply
    fields: dict = {}
    if with_rationale:
        fields["rationale"] = (str, JudgeReply.model_fields["rationale"])
    fields["score"] = (int, Field(ge=low, le=high, description="the score"))
    return create_model(f"Judge{'Rationale' if with_rationale else 'Score'}{low}to{high}", **fields)


@cache
def checklist_schema(checks: tuple[Check, ...], facts: int) -> type[BaseModel]:
    """``{"q1": …, …}``: "yes"|"no" for yes/no questions, 0..``facts`` for fact questions."""
    fields: dict = {}
    for i, check in enumerate(checks, start=1):
        if check.answer == "fact":
            fields[f"q{i}"] = (int, Field(ge=0, le=facts, description="a persona fact's number, 0 for none"))
        else:
            fields[f"q{i}"] = (Literal["yes", "no"], Field(description="yes or no"))
    return create_model(f"Checklist{len(checks)}", **fields)


def checklist_text(checks: Sequence[Check]) -> str:
    return "\n".join(f"q{i}. {c.question.strip()}" for i, c in enumerate(checks, start=1))


# --- from a reply to a score ----------------------------------------------------------------------
def choice_probabilities(
    logprobs: Sequence[TokenLogprobs], key: str, choices: dict[str, int]
) -> dict[int, float] | None:
    """P(choice) at the value of JSON ``key`` in the generated text, renormalised over ``choices``.

    The position is found in the tokens' own text (``"key": `` then the value's first character); the
    token covering it gives the alternatives, read case- and quote-insensitively. None when the key is
    not there or no alternative is one of the choices.
    """
    text = "".join(t.token for t in logprobs)
    matches = list(re.finditer(rf'"{re.escape(key)}"\s*:\s*"?', text))
    if not matches:
        return None
    match = matches[-1]  # the object's own key comes last (a rationale before it may quote one)
    offset = 0
    for token in logprobs:
        offset += len(token.token)
        if offset > match.end():
            probs: dict[int, float] = {}
            for alt, logprob in token.top:
                value = choices.get(alt.strip().strip('"').lower())
                if value is not None:
                    probs[value] = probs.get(value, 0.0) + math.exp(logprob)
            total = sum(probs.values())
            return {v: p / total for v, p in probs.items()} if total > 0 else None
    return None


def expected_score(logprobs: Sequence[TokenLogprobs] | None, scale: tuple[int, int]) -> float | None:
    """Σ p(s)·s over the scale's score tokens at the ``"score"`` value (G-Eval); single-digit scales only."""
    low, high = scale
    if not logprobs or not 0 <= low <= high <= 9:
        return None
    probs = choice_probabilities(logprobs, "score", {str(s): s for s in range(low, high + 1)})
    return sum(p * s for s, p in probs.items()) if probs else None


def checklist_score(
    checks: Sequence[Check], answers: dict[str, Any], logprobs: Sequence[TokenLogprobs] | None,
    scale: tuple[int, int], facts: int, read: Sequence[tuple[Check, float]] = (),
) -> tuple[int, float | None, list[float | None]]:
    """The rule: low + (high − low) · (Σ wᵢ·goodᵢ / Σ wᵢ over weighed checks) · :func:`gate_share`
    (Π good over the gates).

    ``good`` is 1/0 from the stated answers for the integer score (rounded) and P(good) from the
    log-probabilities for the expected one (None unless every asked check has them). ``read``: the checks
    read from the text (``answer: text``) with their P(good), weighed in beside the asked ones (stated good
    when P ≥ 0.5). Returns both scores and the per-check P(good) of the asked checks, then the read ones
    (None where unread), which the verdict's rationale shows.
    """
    low, high = scale
    keyed = [(f"q{i}", check) for i, check in enumerate(checks, start=1)]
    every = [*checks, *(check for check, _ in read)]
    stated = [*stated_good(checks, answers), *(float(p >= 0.5) for _, p in read)]
    probabilities = [*(_p_good(check, logprobs, key, facts) for key, check in keyed), *(p for _, p in read)]
    integer = low + round((high - low) * _combine(every, stated))
    if any(p is None for p in probabilities):
        return integer, None, probabilities
    return integer, low + (high - low) * _combine(every, probabilities), probabilities  # type: ignore[arg-type]


def stated_good(checks: Sequence[Check], answers: dict[str, Any]) -> list[float]:
    """1.0 or 0.0 per check (``q1``, ``q2``, …): whether the stated answer is the good one."""
    return [1.0 if is_good(check, answers.get(f"q{i}")) else 0.0 for i, check in enumerate(checks, start=1)]


def is_good(check: Check, answer: Any) -> bool:
    """Whether a stated answer to ``check`` is the good one (a fact question: any fact)."""
    if check.answer == "fact":
        return isinstance(answer, int) and answer > 0
    return answer == check.good


def _p_good(check: Check, logprobs: Sequence[TokenLogprobs] | None, key: str, facts: int) -> float | None:
    if not logprobs:
        return None
    if check.answer == "fact":  # P(any fact) = 1 − P(0); numbers ≥ 10 start with a non-zero digit too
        probs = choice_probabilities(logprobs, key, {str(n): n for n in range(min(facts, 9) + 1)})
        return None if probs is None else 1.0 - probs.get(0, 0.0)
    probs = choice_probabilities(logprobs, key, {"yes": 1, "no": 0})
    return None if probs is None else probs.get(1 if check.good == "yes" else 0, 0.0)


def _combine(checks: Sequence[Check], good: Sequence[float]) -> float:
    weighed = [(c.weight, g) for c, g in zip(checks, good, strict=True) if not c.gate]
    share = sum(w * g for w, g in weighed) / sum(w for w, _ in weighed) if weighed else 1.0
    return share * gate_share(checks, good)


# --- evidence: fitted weights ---------------------------------------------------------------------
class EvidenceModel(BaseModel):
    """A logistic model of the share of the rubric's scale a response earns, from standardised inputs.

    ``inputs`` name a check's P(good) (``check:<name>``) or a text feature (``judges/features.py``);
    ``mean``/``scale`` standardise each, ``weights`` and ``intercept`` are the fitted coefficients:
    score = low + (high − low) · σ(intercept + Σ wᵢ · (xᵢ − meanᵢ) / scaleᵢ).
    """

    model_config = ConfigDict(frozen=True)

    inputs: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    weights: tuple[float, ...]
    intercept: float
    fitted_on: str = ""  # which data and command produced it

    def share(self, values: dict[str, float]) -> float:
        """σ(intercept + Σ wᵢ zᵢ): the share of the scale, in (0, 1)."""
        z = self.intercept + sum(
            w * (values[name] - m) / s
            for name, m, s, w in zip(self.inputs, self.mean, self.scale, self.weights, strict=True)
        )
        return 1.0 / (1.0 + math.exp(-max(min(z, 60.0), -60.0)))

    @property
    def features(self) -> tuple[str, ...]:
        """The text features it reads (inputs that are not checks)."""
        return tuple(name for name in self.inputs if not name.startswith("check:"))


def _evidence_model(label: str, entry: Any) -> EvidenceModel:
    try:
        model = EvidenceModel.model_validate(entry)
    except (ValidationError, TypeError) as exc:
        raise PersonagraphError(f"personagraph/{EVIDENCE_FILE}: {label}: {exc}".splitlines()[0]) from None
    if not len(model.inputs) == len(model.mean) == len(model.scale) == len(model.weights):
        raise PersonagraphError(f"personagraph/{EVIDENCE_FILE}: {label}: inputs, mean, scale and weights "
                                "must have one entry each")
    return model


@lru_cache(maxsize=1)
def _evidence_models() -> dict[str, EvidenceModel]:
    """The per-rubric models (``models``), by task name."""
    data = read_yaml(EVIDENCE_FILE) or {}
    models = data.get("models") or {}
    return {str(task): _evidence_model(str(task), entry) for task, entry in models.items()}


def evidence_model(rubric: Rubric) -> EvidenceModel | None:
    """The fitted model of the rubric (by task name), None when it has none (then the checklist rule)."""
    return _evidence_models().get(rubric.task)


@lru_cache(maxsize=1)
def grounding_model() -> EvidenceModel | None:
    """P(the response draws on the persona's facts) from its text alone (``grounding`` in the file): a
    logistic model of the persona stems it states and its best sentence-to-fact MiniLM cosine, fitted on
    the graded Uses Knowledge ratings (bench/fit_evidence.py). The ``answer: text`` checks of the rubrics
    without a fitted model read it: there the small judge's own "which fact shapes it" answer barely tells
    an answer that plays the persona from one that plays another (``eval --controls``: the contrast arm)."""
    entry = (read_yaml(EVIDENCE_FILE) or {}).get("grounding")
    if entry is None:
        return None
    model = _evidence_model("grounding", entry)
    if len(model.features) < len(model.inputs):
        raise PersonagraphError(f"personagraph/{EVIDENCE_FILE}: grounding: reads the text only, no check")
    return model


def asked_checks(protocol: Protocol, rubric: Rubric) -> tuple[Check, ...]:
    """The questions the judge is asked: the rubric's checklist (never its ``text`` or ``fit`` checks), but
    under a weighed protocol with a fitted model only the checks the model reads, none when it reads none
    (the fitted Persona Consistency model: no judge call). Its gates are read from the response instead
    (:func:`read_gates`); asking the others would change no score and cost prompt tokens per verdict."""
    asked = tuple(c for c in checklist(rubric) if c.answer not in READ_ANSWERS)
    checks = asked if protocol.reply == "checklist" else ()
    model = evidence_model(rubric) if protocol.weighed else None
    if model is None:
        return checks
    read = set(model.inputs)
    return tuple(c for c in checks if not c.gate and f"check:{c.name}" in read)


def read_gates(protocol: Protocol, rubric: Rubric) -> tuple[Check, ...]:
    """The gates a fitted model's verdict reads from the response by the persona-break markers
    (``judges/refusal.py``: good unless a marker matches), not asked of the judge: on the refusal sentences
    the markers catch what the 1.5B's answer to the gate question misses (docs/benchmarks.md#refusal-markers),
    and the verdict then needs no call."""
    if not protocol.weighed or evidence_model(rubric) is None:
        return ()
    return tuple(c for c in checklist(rubric) if c.gate)


def text_checks(protocol: Protocol, rubric: Rubric) -> tuple[Check, ...]:
    """The checks read from the response (``answer: text`` or ``fit``) that score the rubric: under a
    weighed protocol, for a rubric scored by its checklist rule (no fitted model); ``text`` checks when the
    grounding model is packaged."""
    if not protocol.weighed or evidence_model(rubric) is not None:
        return ()
    readable = ("fit", "text") if grounding_model() is not None else ("fit",)
    return tuple(c for c in checklist(rubric) if c.answer in readable)


def check_probabilities(checks: Sequence[Check], good: Sequence[float | None]) -> dict[str, float | None]:
    """``check:<name>`` → P(good) of every named check."""
    return {f"check:{c.name}": p for c, p in zip(checks, good, strict=True) if c.name}


def gate_share(checks: Sequence[Check], good: Sequence[float]) -> float:
    """Π P(good) over the gates: what an AI disclosure leaves of the score.

    Under the checklist rule, the judge's plain probability, not its yes/no: the 1.5B's P(no disclosure)
    also falls for a reply that does not fit the persona, which is signal the rubrics without fitted
    weights rely on. A fitted model's gates are read from the text (:func:`read_gates`): 1 or 0."""
    return math.prod(g for c, g in zip(checks, good, strict=True) if c.gate)
