"""The shapes of the run store's records, by kind: what a ``records`` row of ``run.sqlite`` must hold.

A run directory outlives the process that wrote it: it is resumed, reported, compared, copied and now
and then edited by hand. :class:`~personagraph.store.RunStore` checks every row of a kind listed in
:data:`RECORD_TYPES` against its type (on opening a store to write, and on each read of a read-only
store), so a damaged row is one line naming the store, the record and the field — never a ``KeyError``
deep inside a summary or an empty report. The types list the fields readers rely on; rows keep any
others, and a kind not listed here only has to be a JSON object.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from personagraph.schemas import Answer, Environment, Exemplars, ItemScore, Question, Status, Verdict


class _Record(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


# --- eval (graphs/persona_eval.py, runs/executors/base.py) ------------------------------------------------
class SelectionRecord(_Record):
    """A persona's environment selection (``selection``)."""

    persona_id: str
    persona: str
    status: Status
    error: str | None = None
    environments: list[Environment]
    unknown: list[str] = Field(default_factory=list)
    requested: int
    shortfall: int


class QuestionBatchRecord(_Record):
    """How one task's question list came out (``question_batch``)."""

    persona_id: str
    task: str
    status: Status
    error: str | None = None
    requested: int
    shortfall: int


class PersonaDoneRecord(_Record):
    """A persona graph that reached its end (``persona_done``)."""

    persona_id: str
    errors: list[dict[str, Any]] = Field(default_factory=list)


class UnitRecord(_Record):
    """A persona unit of one config that ended (``unit_done``, ``unit_failed``)."""

    persona_id: str
    fingerprint: str
    attempts: int
    records: dict[str, list[str]] = Field(default_factory=dict)  # what the unit held when it ended, by kind


# --- sessions (judges/session.py: session_record) ------------------------------------------------------
class SessionTurn(_Record):
    """One turn of a session, as the ``session`` record's ``turns`` and the ``turn`` records hold it."""

    index: int
    role: Literal["user", "assistant"]
    text: str
    status: str
    scores: dict[str, dict[str, float | None]] | None = None  # assistant turns: judge → task → score


class TurnRecord(SessionTurn):
    """One finished turn (``turn``)."""

    session_id: str


class SessionNumbers(_Record):
    """The numbers of a session verdict that summaries read."""

    agent_turns: int
    failed_turns: int
    turns_at_token_limit: int = 0  # agent replies that used their whole max_tokens (0 in older sessions)
    mean_score: float | None
    task_means: dict[str, float]
    drift_slope: float | None


class SessionRecord(_Record):
    """A session, running or finished (``session``)."""

    id: str
    persona: str
    agent: str
    user: str
    user_persona: str
    scenario: str
    adversarial: bool
    status: str
    turns: list[SessionTurn]
    stop_reason: str | None
    break_: dict[str, Any] | None = Field(alias="break")
    drift_slope: float | None
    session_verdict: SessionNumbers | None


class SessionRetryRecord(_Record):
    """How often a session with failed items ran again (``session_retry``, runs/simulate.py)."""

    attempts: int


# --- items of the metric runs (persobench, longlamp: a generation, or a failed one) ----------------------
class StoredItem(_Record):
    """An item as every run kind stores it: its id and, when it failed, ``status`` and ``error``."""

    id: str
    status: str = "ok"
    error: str | None = None


# --- behavior alignment (runs/behavior.py) ----------------------------------------------------------------
class BehaviorLabel(StoredItem):
    """An LLM label of an utterance or a system response (``behavior.label``); None when none was valid."""

    label: str | None


class BehaviorResponse(StoredItem):
    """A generated system response (``behavior.response``); None when it failed or came back empty."""

    text: str | None


class BehaviorSystemTurn(_Record):
    """A system response with its label and the human labels of that turn (``behavior.system``)."""

    dialog_id: str
    turn: int
    response: str | None
    label: str | None
    human: list[str]
    ba: float | None


# --- memory dialogue, MADial (runs/memory_dialogue.py, memory/dialogue_eval.py) ---------------------------
class MadialResponse(_Record):
    """The reply at one test turn, the memory it chose and the reference (``madial_response``)."""

    key: str
    dialogue: int
    turn: int
    user_id: str
    candidate_ids: list[str]
    chosen_id: str | None
    reply: str
    status: str | None
    error: str | None = None
    reference: str


class MadialScore(_Record):
    """The judge's score of one criterion (None when it gave none, with the reason)."""

    score: float | None
    error: str | None = None


class MadialVerdict(_Record):
    """One test turn judged (``madial_verdict``): criteria scores, the intimacy pick, what was recognized."""

    key: str
    status: str | None
    error: str | None = None
    recognition_error: str | None = None
    scores: dict[str, MadialScore]
    intimacy_win: bool | None
    recognized_gold: bool
    recognized_relevant: bool
    chose_memory: bool


class MadialSummary(_Record):
    """One setting's numbers (``madial_summary``: memory/dialogue_eval.py ``summarize``)."""

    setting: int
    model: str
    judge: str
    turns: int
    failed_replies: int
    criteria: dict[str, float | None]
    intimacy_win_rate: float | None
    chose_memory: float | None
    recognized_gold: float | None
    recognized_relevant: float | None


RECORD_TYPES: dict[str, type[BaseModel]] = {
    "selection": SelectionRecord,
    "question_batch": QuestionBatchRecord,
    "question": Question,
    "answer": Answer,
    "exemplars": Exemplars,
    "verdict": Verdict,
    "item_score": ItemScore,
    "persona_done": PersonaDoneRecord,
    "unit_done": UnitRecord,
    "unit_failed": UnitRecord,
    "turn": TurnRecord,
    "session": SessionRecord,
}
"""Record kind → the type its rows are checked against (kinds not listed: any JSON object)."""


def register_record_type(kind: str, record_type: type[BaseModel]) -> None:
    """Declares the type of a record kind whose type lives above this floor (a run kind's own records):
    called where the kind is named, so any code that writes or reads that kind has declared it."""
    RECORD_TYPES[kind] = record_type

META_TYPES: dict[str, type] = {"kind": str, "config": dict, "data_files": dict}
"""Meta key → the JSON type its value must have (the keys a resumed run reads back before rewriting)."""


def record_problem(kind: str, data: Any) -> str | None:
    """What is wrong with a record of ``kind`` (its first bad field and why, one line), or None."""
    if not isinstance(data, dict):
        return f"expected a JSON object, got {type(data).__name__}"
    record_type = RECORD_TYPES.get(kind)
    if record_type is None:
        return None
    try:
        record_type.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "record"
        return f"{where}: {first['msg']}"
    return None


def meta_problem(key: str, value: Any) -> str | None:
    """What is wrong with a meta value (its JSON type), or None."""
    expected = META_TYPES.get(key)
    if expected is None or isinstance(value, expected):
        return None
    names = {str: "string", dict: "JSON object"}
    return f"expected a {names.get(expected, expected.__name__)}, got {type(value).__name__}"
