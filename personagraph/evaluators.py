"""personagraph's judges as evaluators in the openevals convention, for LangSmith experiments, openevals
simulations or a loop of your own.

An evaluator is called ``evaluator(*, inputs, outputs, reference_outputs=None, **kwargs)`` and returns
``{"key", "score", "comment", "metadata"}``, as openevals' ``create_llm_as_judge`` ones do::

    from personagraph.evaluators import create_persona_judge

    judge = create_persona_judge(judge="openai:gpt-4o")
    judge(inputs={"persona": "A retired cowboy", "question": "How do you travel?"}, outputs="On horseback.")
    # {"key": "persona_consistency", "score": 0.75, "comment": "...", "metadata": {"rubric_score": 4, ...}}

The score is the one ``eval`` gives: the same rubric, protocol and judge call
(:func:`~personagraph.judges.judge.judge_answer`), persona-break caps included; ``score`` is normalised to
0–1 (``normalize=False``: the rubric's scale) from the probability-weighted score where the judge returns
log-probabilities, else the integer one. A verdict that does not parse has ``score`` None, never 0.
Session judges (:func:`create_session_judge`) judge a whole conversation as ``simulate`` does.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal

from langchain_core.messages import convert_to_openai_messages

from personagraph.agents.plugin import content_text
from personagraph.api import settings_for
from personagraph.environments.pool import task_by_name
from personagraph.errors import PersonagraphError
from personagraph.files import lone_surrogate
from personagraph.judges.base import Judge, as_judge
from personagraph.judges.judge import judge_answer, ready_protocol
from personagraph.judges.refusal import detect_refusal
from personagraph.judges.rubrics import Rubric, load_rubric
from personagraph.judges.scoring import minimum_score
from personagraph.judges.session import SESSION_RUBRIC, score_turn, session_verdict
from personagraph.models import Endpoint
from personagraph.models.spec import DEFAULT_JUDGE
from personagraph.resources import list_dir
from personagraph.runs.base import run_to_completion
from personagraph.runs.plugins import judge_for, object_name
from personagraph.runs.simulate import SimulateConfig
from personagraph.schemas import MAX_PERSONA_CHARS, Answer, Persona, Question, Task

EvaluatorResult = dict[str, Any]
Evaluator = Callable[..., EvaluatorResult]
AsyncEvaluator = Callable[..., Awaitable[EvaluatorResult]]
ScoreKind = Literal["expected", "integer"]
# The judge calls' token budgets are simulate's (eval's turn judge uses the same 200).
TURN_TOKENS = SimulateConfig.model_fields["max_judge_tokens"].default
VERDICT_TOKENS = SimulateConfig.model_fields["max_verdict_tokens"].default


# --- building blocks ----------------------------------------------------------------------------------
def _judge(judge: Any, role: str, max_tokens: int, settings: Any) -> Judge:
    """A judge from a model spec or ``module:attr`` path (``judges=`` of ``evaluate`` take the same) or an
    object (a :class:`Judge`, or anything an agent can be: its reply is read as the verdict's JSON)."""
    if judge is None:
        judge = DEFAULT_JUDGE
    if isinstance(judge, str):
        return judge_for(judge.strip(), role, settings=settings, temperature=0.0, max_tokens=max_tokens)
    return as_judge(judge, object_name(judge))


def _task(rubric: str) -> Task:
    """The task a rubric judges: a task name or alias ("Persona Consistency", "toxicity") or a packaged
    rubric key (``judges/rubrics/<key>.yaml``)."""
    found = task_by_name(rubric)
    if found is not None:
        return found
    keys = [name.removesuffix(".yaml") for name in list_dir("judges/rubrics") if name.endswith(".yaml")]
    if rubric not in keys:
        raise PersonagraphError(f"rubric={rubric!r}: no such task or rubric; choose one of {', '.join(keys)}")
    loaded = load_rubric(rubric)
    return Task(name=loaded.task, key=rubric, description=loaded.criterion, question_requirements="",
                rubric=rubric)


def _messages(value: Any, field: str) -> list[dict[str, Any]]:
    """A conversation (messages of any LangChain-known shape, or ``{"messages": [...]}``) as OpenAI dicts."""
    if isinstance(value, dict) and "messages" in value:
        value = value["messages"]
    if not isinstance(value, list | tuple):
        value = [value]
    try:
        return [dict(m) for m in convert_to_openai_messages(list(value))]
    except (ValueError, TypeError, NotImplementedError) as exc:
        reason = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
        raise PersonagraphError(f"{field}: not a message list ({reason})") from None


def _text(message: dict[str, Any]) -> str:
    return content_text(message.get("content", "")).strip()


def _reply(outputs: Any) -> str:
    """The reply in ``outputs``: a string, a message, ``{"messages": [...]}`` (the last assistant
    message) or a target's dict with a text field (``output``, ``answer``, ``content``, ``text``,
    ``response``: the first there)."""
    if isinstance(outputs, str):
        return outputs.strip()
    if isinstance(outputs, dict) and "messages" not in outputs and "role" not in outputs:
        texts = [outputs[k] for k in ("output", "answer", "content", "text", "response")
                 if isinstance(outputs.get(k), str)]
        if not texts:
            raise PersonagraphError(
                f"outputs: expected a string, a message or {{'messages': [...]}}; got a dict with keys "
                f"{', '.join(map(str, list(outputs)[:6])) or 'none'}"
            )
        return texts[0].strip()
    replies = [m for m in _messages(outputs, "outputs") if m.get("role") == "assistant"]
    if not replies:
        raise PersonagraphError("outputs: holds no assistant message")
    return _text(replies[-1])


def _persona(inputs: dict[str, Any], default: str | None) -> str:
    """``inputs["persona"]``, else ``default``, else the system message of ``inputs["messages"]``."""
    value = inputs.get("persona", default)
    if value is None and inputs.get("messages") is not None:
        messages = _messages(inputs["messages"], "inputs.messages")
        value = next((_text(m) for m in messages if m.get("role") == "system"), None)
    if isinstance(value, Persona):
        value = value.description
    if value is not None and not isinstance(value, str):
        raise PersonagraphError(
            f"inputs: 'persona' must be text (its description), not {type(value).__name__}"
        )
    if value is None or not value.strip():
        raise PersonagraphError(
            "inputs: no 'persona' (give inputs={'persona': ..., ...} or create the judge with persona=...)"
        )
    if len(value) > MAX_PERSONA_CHARS:
        raise PersonagraphError(
            f"inputs: 'persona' is {len(value)} characters; the limit is {MAX_PERSONA_CHARS}"
        )
    return " ".join(value.split())


def _question(inputs: dict[str, Any], outputs: Any) -> str:
    """``inputs["question"]``, else the last user message of ``inputs["messages"]`` or of ``outputs``."""
    if isinstance(inputs.get("question"), str) and inputs["question"].strip():
        return inputs["question"].strip()
    for where, value in (("inputs.messages", inputs.get("messages")), ("outputs", outputs)):
        if value is None or isinstance(value, str):
            continue
        if isinstance(value, dict) and "messages" not in value and "role" not in value:
            continue
        users = [m for m in _messages(value, where) if m.get("role") == "user"]
        if users:
            return _text(users[-1])
    raise PersonagraphError("inputs: no 'question' (give inputs={'question': ...} or {'messages': [...]})")


def _key(key: Any, default: str) -> str:
    """The feedback key: ``key`` (a non-empty string) or ``default``."""
    if key is None:
        return default
    if not isinstance(key, str) or not key.strip():
        raise PersonagraphError(f"key={key!r}: not a name (give a non-empty string)")
    return key


def _encodable(texts: dict[str, Any]) -> None:
    """Refuses text that cannot be encoded (a lone surrogate, from bytes decoded with ``surrogateescape``)."""
    for where, value in texts.items():
        if (found := lone_surrogate(value)) is not None:
            raise PersonagraphError(f"{where}: holds the unpaired surrogate {found}, which is not text "
                                    "(decode the bytes as UTF-8 first)")


def _scaled(value: float | None, scale: tuple[int, int], normalize: bool) -> float | None:
    """``value`` on the rubric's scale, or mapped to 0–1 (``normalize``)."""
    if value is None or not normalize:
        return value
    low, high = scale
    return round((value - low) / (high - low), 4)


# --- one answer ---------------------------------------------------------------------------------------
class PersonaJudge:
    """One rubric, one judge: scores a reply to a question as ``eval`` scores an answer."""

    def __init__(self, *, rubric: str, judge: Any, protocol: str | None, persona: str | None, key: str | None,
                 normalize: bool, score_kind: ScoreKind, settings: Any) -> None:
        if score_kind not in ("expected", "integer"):
            raise PersonagraphError(f"score_kind={score_kind!r}: choose 'expected' or 'integer'")
        self.task = _task(rubric)
        self.rubric: Rubric = load_rubric(self.task.rubric)
        self.judge = _judge(judge, "judge", TURN_TOKENS, settings)
        self.protocol = ready_protocol(protocol, self.judge.name)  # an unknown name fails here, in one line
        self.persona = persona
        self.key = _key(key, self.task.rubric)
        self.normalize = normalize
        self.score_kind = score_kind

    async def score(self, inputs: Any, outputs: Any) -> EvaluatorResult:
        inputs = inputs if isinstance(inputs, dict) else {}
        persona = _persona(inputs, self.persona)
        question = _question(inputs, outputs)
        reply = _reply(outputs)
        _encodable({"inputs": [persona, question], "outputs": reply})
        base = {"rubric": self.rubric.task, "scale": list(self.rubric.scale), "judge": self.judge.name,
                "protocol": self.protocol.name}
        if not reply:  # a non-answer scores the rubric's minimum, as in eval
            low = minimum_score(self.task.name)
            return {"key": self.key, "score": _scaled(low, self.rubric.scale, self.normalize),
                    "comment": "empty reply: scored the rubric's minimum",
                    "metadata": {**base, "status": "non_answer", "rubric_score": low}}
        marker = detect_refusal(reply)
        question_item = Question(id="question", persona_id="persona", task=self.task.name, text=question)
        answer = Answer(id="answer", question_id="question", persona_id="persona", task=self.task.name,
                        model="outputs", status="ok", text=reply, refusal=marker is not None,
                        refusal_marker=marker)
        verdict = await judge_answer(self.judge, persona, self.task, question_item, answer,  # type: ignore[arg-type]
                                     None, self.protocol)
        metadata = {**base, "status": verdict.status, "rubric_score": verdict.score,
                    "expected_score": verdict.expected_score, "judge_score": verdict.judge_score,
                    "capped_by": verdict.capped_by}
        if verdict.status != "ok" or verdict.score is None:
            return {"key": self.key, "score": None, "comment": f"verdict failed: {verdict.error}",
                    "metadata": {**metadata, "error": verdict.error, "raw": verdict.raw}}
        expected = self.score_kind == "expected" and verdict.expected_score is not None
        value = verdict.expected_score if expected else float(verdict.score)
        metadata["normalized"] = _scaled(value, self.rubric.scale, True)
        comment = verdict.rationale
        if verdict.capped_by:
            comment = f"{comment} (capped from {verdict.judge_score}: {verdict.capped_by})".strip()
        return {"key": self.key, "score": _scaled(value, self.rubric.scale, self.normalize),
                "comment": comment, "metadata": metadata}


def _persona_judge(rubric: str, judge: Any, protocol: str | None, persona: str | Persona | None,
                   key: str | None, normalize: bool, score_kind: ScoreKind, base_url: str | None,
                   api_key: str | None, endpoints: Sequence[str | Endpoint]) -> PersonaJudge:
    return PersonaJudge(
        rubric=rubric, judge=judge, protocol=protocol,
        persona=persona.description if isinstance(persona, Persona) else persona, key=key,
        normalize=normalize, score_kind=score_kind, settings=settings_for(base_url, api_key, endpoints),
    )


def create_async_persona_judge(
    *,
    rubric: str = "persona_consistency",
    judge: Any = None,
    protocol: str | None = None,
    persona: str | Persona | None = None,
    key: str | None = None,
    normalize: bool = True,
    score_kind: ScoreKind = "expected",
    base_url: str | None = None,
    api_key: str | None = None,
    endpoints: Sequence[str | Endpoint] = (),
) -> AsyncEvaluator:
    """An async evaluator scoring a persona's reply on one rubric with personagraph's judge.

    Args:
        rubric: a task name or alias (``"Persona Consistency"``, ``"toxicity"``) or a packaged rubric key
            (``persona_consistency``, ``linguistic_habits``, …).
        judge: a model spec (default: the embedded judge), a ``module:attr`` path or a judge object, as
            ``evaluate(judges=...)`` takes them.
        protocol: how the judge is asked (``judges/protocols.py``); None: the judge's default.
        persona: the persona when ``inputs`` carries none.
        key: the feedback key (default: the rubric key).
        normalize: ``score`` on 0–1 (default) or on the rubric's scale; both are in ``metadata``.
        score_kind: ``expected`` (probability-weighted where the judge gives log-probabilities) or
            ``integer``.
        base_url, api_key, endpoints: where ``openai:`` judges are, as in :func:`personagraph.evaluate`.

    The evaluator takes ``inputs`` with ``persona`` and ``question`` (or ``messages``: the last user
    message is the question) and ``outputs``: the reply as a string, a message or ``{"messages": [...]}``.

    Raises:
        PersonagraphError: an unknown rubric, protocol or judge (here); inputs or outputs without a persona,
            question or reply (at the call).
    """
    scorer = _persona_judge(rubric, judge, protocol, persona, key, normalize, score_kind, base_url, api_key,
                            endpoints)

    async def evaluator(*, inputs: Any = None, outputs: Any, reference_outputs: Any = None,
                        **kwargs: Any) -> EvaluatorResult:
        return await scorer.score(inputs, outputs)

    evaluator.__name__ = evaluator.__qualname__ = scorer.key
    return evaluator


def create_persona_judge(
    *,
    rubric: str = "persona_consistency",
    judge: Any = None,
    protocol: str | None = None,
    persona: str | Persona | None = None,
    key: str | None = None,
    normalize: bool = True,
    score_kind: ScoreKind = "expected",
    base_url: str | None = None,
    api_key: str | None = None,
    endpoints: Sequence[str | Endpoint] = (),
) -> Evaluator:
    """The sync twin of :func:`create_async_persona_judge` (same arguments, same results)."""
    scorer = _persona_judge(rubric, judge, protocol, persona, key, normalize, score_kind, base_url, api_key,
                            endpoints)

    def evaluator(*, inputs: Any = None, outputs: Any, reference_outputs: Any = None,
                  **kwargs: Any) -> EvaluatorResult:
        return run_to_completion(scorer.score(inputs, outputs))

    evaluator.__name__ = evaluator.__qualname__ = scorer.key
    return evaluator


# --- a whole conversation -----------------------------------------------------------------------------
def _turns(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A trajectory as session turn entries (``runs/simulate.py``'s ``turn`` shape), system messages and
    tool traffic left out: a user message and the agent's reply to it share an index."""
    turns: list[dict[str, Any]] = []
    index, previous = 0, None
    for message in messages:
        role = message.get("role")
        if role not in ("user", "assistant"):
            continue
        if role == "user" or previous != "user":
            index += 1
        previous = role
        text = _text(message)
        turns.append({"index": index, "role": role, "text": text, "status": "ok" if text else "empty",
                      "error": None, "level": None, "stop": False,
                      "refusal_marker": detect_refusal(text) if role == "assistant" and text else None})
    return turns


class SessionJudge:
    """Judges a conversation as ``simulate`` does: every agent turn on the turn rubrics, then the session
    verdict (Session Consistency, contradictions, drift, persona breaks)."""

    def __init__(self, *, judge: Any, persona: str | None, key: str, normalize: bool, settings: Any) -> None:
        self.turn_judge = _judge(judge, "judge", TURN_TOKENS, settings)
        self.verdict_judge = _judge(judge, "session_judge", VERDICT_TOKENS, settings)
        self.persona = persona
        self.key = key
        self.normalize = normalize
        self.scale = load_rubric(SESSION_RUBRIC).scale

    async def score(self, inputs: Any, outputs: Any) -> EvaluatorResult:
        inputs = inputs if isinstance(inputs, dict) else {}
        messages = _messages(outputs, "outputs")
        system = [_text(m) for m in messages if m.get("role") == "system"]
        persona = _persona(inputs, self.persona or (system[0] if system else None))
        turns = _turns(messages)
        _encodable({"inputs": persona, "outputs": [t["text"] for t in turns]})
        if not any(t["role"] == "assistant" and t["status"] == "ok" for t in turns):
            raise PersonagraphError("outputs: the conversation has no assistant reply to judge")
        last_user = ""
        for entry in turns:
            if entry["role"] == "user":
                last_user = entry["text"]
            elif entry["status"] == "ok":
                entry["scores"], entry["rationales"] = await score_turn([self.turn_judge], persona, last_user,
                                                                        entry["text"])
        verdict = await session_verdict([self.verdict_judge], persona, turns)
        by_judge = verdict["judges"].get(self.verdict_judge.name, {})
        metadata = {key: verdict[key] for key in ("consistency", "mean_score", "task_means", "turn_means",
                                                  "drift_slope", "drift_by_task", "breaks", "contradictions",
                                                  "agent_turns")}
        shown = ("index", "text", "scores", "rationales", "refusal_marker")
        metadata.update(judge=self.verdict_judge.name, scale=list(self.scale), status=by_judge.get("status"),
                        turns=[{k: t.get(k) for k in shown} for t in turns if t["role"] == "assistant"])
        if verdict["consistency"] is None:
            return {"key": self.key, "score": None, "comment": f"verdict failed: {by_judge.get('error')}",
                    "metadata": {**metadata, "error": by_judge.get("error")}}
        metadata["normalized"] = _scaled(verdict["consistency"], self.scale, True)
        return {"key": self.key, "score": _scaled(verdict["consistency"], self.scale, self.normalize),
                "comment": by_judge.get("rationale", ""), "metadata": metadata}


def _session_judge(judge: Any, persona: str | Persona | None, key: str, normalize: bool, base_url: str | None,
                   api_key: str | None, endpoints: Sequence[str | Endpoint]) -> SessionJudge:
    return SessionJudge(judge=judge, persona=persona.description if isinstance(persona, Persona) else persona,
                        key=_key(key, SESSION_RUBRIC), normalize=normalize,
                        settings=settings_for(base_url, api_key, endpoints))


def create_async_session_judge(
    *,
    judge: Any = None,
    persona: str | Persona | None = None,
    key: str = SESSION_RUBRIC,
    normalize: bool = True,
    base_url: str | None = None,
    api_key: str | None = None,
    endpoints: Sequence[str | Endpoint] = (),
) -> AsyncEvaluator:
    """An async trajectory evaluator: judges a whole conversation as ``simulate`` judges a session.

    ``outputs`` is the conversation (a message list or ``{"messages": [...]}``: what openevals'
    ``run_multiturn_simulation`` passes its trajectory evaluators); the persona comes from
    ``inputs["persona"]``, else ``persona=``, else the conversation's system message. ``score`` is the
    session judge's Session Consistency (0–1, or 1–5 with ``normalize=False``); ``metadata`` holds the
    per-turn scores and rationales, task means, drift (slope of the turn scores), persona breaks and
    contradictions. ``judge`` and the endpoint arguments as in :func:`create_async_persona_judge`.
    """
    scorer = _session_judge(judge, persona, key, normalize, base_url, api_key, endpoints)

    async def evaluator(*, inputs: Any = None, outputs: Any, reference_outputs: Any = None,
                        **kwargs: Any) -> EvaluatorResult:
        return await scorer.score(inputs, outputs)

    evaluator.__name__ = evaluator.__qualname__ = scorer.key
    return evaluator


def create_session_judge(
    *,
    judge: Any = None,
    persona: str | Persona | None = None,
    key: str = SESSION_RUBRIC,
    normalize: bool = True,
    base_url: str | None = None,
    api_key: str | None = None,
    endpoints: Sequence[str | Endpoint] = (),
) -> Evaluator:
    """The sync twin of :func:`create_async_session_judge` (same arguments, same results)."""
    scorer = _session_judge(judge, persona, key, normalize, base_url, api_key, endpoints)

    def evaluator(*, inputs: Any = None, outputs: Any, reference_outputs: Any = None,
                  **kwargs: Any) -> EvaluatorResult:
        return run_to_completion(scorer.score(inputs, outputs))

    evaluator.__name__ = evaluator.__qualname__ = scorer.key
    return evaluator
