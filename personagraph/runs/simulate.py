"""The ``simulate`` run: multi-turn sessions (simulated user ↔ agent); also ``judge_session`` (a saved
transcript) and ``chat`` (a human as the user). Turn judging and the session verdict are in
``judges/session.py``, transcripts in ``transcripts.py``.

Each session runs through ``graphs/session.py`` with its own checkpoint thread (``thread_id`` = session
id): SQLite in the run directory by default, Postgres with ``checkpoint_url="postgresql://…"``. A session
interrupted anywhere resumes from its last finished step when the same config runs on the same run
directory again (session ids are derived from the config); every LLM call also goes through the run
store's response cache.

Records (store meta ``kind="simulate"``; the report renders them):

``turn`` (id ``<session>:<index>:<role>``, unit = session id), written as each turn finishes — one
transcript entry::

    {index: int (1-based; a user message and the agent's reply share it), role: "user"|"assistant",
     text: str, status: "ok"|"failed"|"empty", error: str|None, level: 1|2|3|None (adversarial),
     stop: bool (user: ended the conversation), refusal_marker: str|None (assistant: persona-break phrase),
     at_token_limit: bool (assistant: the reply used its whole max_tokens), scores: {judge: {task:
     int|None}} (assistant), rationales: {judge: {task: str}} (assistant), session_id: str}

``session`` (id = session id, unit = session id), rewritten after every turn (``status="running"``) and
at the end (``status="finished"``)::

    {id, persona, user_persona, scenario, adversarial: bool, max_turns, min_turns, agent, user,
     judges: [spec],
     status: "running"|"finished", turns: [entry as above, without session_id], stop_reason:
     "max_turns"|"user_stop"|"user_failed"|"user_empty"|"agent_failed"|"agent_empty"|None,
     break: {level, turn, source: "refusal_marker"|"judge", marker} | None, drift_slope: float|None,
     session_verdict: {judges: {judge: {status, score, rationale, contradictions: [{earlier_turn,
     later_turn, description}], error}}, skipped_judges: [spec], consistency: float|None (mean session
     score, 1–5), contradictions: [{judge, earlier_turn, later_turn, description}], n_contradictions:
     float|None (mean count over judges that answered), task_means: {task: float}, mean_score:
     float|None, turn_means: [{turn, score}], drift_slope, drift_by_task: {task: float|None},
     breaks: [{turn, level, source, marker}], agent_turns, failed_turns, turns_at_token_limit}}

``summary.json``: ``{kind: "simulate", sessions: [per-session numbers], overall: {...}, judges,
skipped_judges, llm_calls, cache_hits, wall_time_s, roles, tokens, run_dir}`` (see :func:`build_summary`).

Transcripts: ``<run_dir>/transcripts/<session>.jsonl`` (a ``header`` line, one ``turn`` line per entry,
an ``end`` line once finished) and ``<session>.md``.

Failed items (:func:`session_failures`): failed or empty agent and user turns, turn verdicts a judge did
not give, failed session verdicts, finished sessions with fewer agent replies than ``min_turns``. A
finished session with failed items runs again on resume (unless ``retry_failed`` is off) on a fresh
checkpoint thread ``<session>-retry<n>`` (``session_retry`` records count them): the response cache
replays every call that succeeded, so only the failed calls are sent.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np
from pydantic import BaseModel, Field, field_validator, model_validator

from personagraph.agents.base import Agent
from personagraph.agents.cached import CachedAgent
from personagraph.agents.persona import PersonaAgent
from personagraph.agents.user_sim import SimulatedUser, User, default_scenario, default_user_persona
from personagraph.errors import PersonagraphError
from personagraph.graphs.session import SessionContext, build_graph
from personagraph.judges.base import Judge
from personagraph.judges.cards import validity_lines
from personagraph.judges.refusal import detect_refusal
from personagraph.judges.session import (
    SESSION_RUBRIC,
    TURN_RUBRICS,
    check_self_judging,
    score_turn,
    session_record,
    session_verdict,
    split_judges,
    turn_numbers,
)
from personagraph.models import DEFAULT_JUDGE, DEFAULT_MODEL, ModelClient, ModelSettings, parse_spec
from personagraph.models.settings import MAX_CONCURRENCY
from personagraph.personas import parse_persona
from personagraph.prompts import load_prompt
from personagraph.records import SessionRetryRecord, register_record_type
from personagraph.resources import data_hash
from personagraph.runs.base import FailedItem, ProgressHandler, Run, Summary, redact_url, synchronous
from personagraph.runs.plugins import check_judge_names, given_by_name, judge_for, load_plugins
from personagraph.schemas import MAX_PERSONA_CHARS, Seed, persona_description, short_id, slug
from personagraph.store import RunStore, sqlite_checkpointer
from personagraph.transcripts import MAX_TURNS, read_transcript, write_transcript

KIND = "simulate"
RETRY_KIND = "session_retry"  # record kind: {attempts}, how often a session with failed items ran again
register_record_type(RETRY_KIND, SessionRetryRecord)

DEFAULT_AGENT = DEFAULT_MODEL  # the defaults live in models/spec.py
DEFAULT_USER = DEFAULT_JUDGE  # the simulated user: the larger embedded model
PROMPTS = ("persona", "user_sim", "user_adversarial", "judge", "session_verdict")


# --- config -----------------------------------------------------------------------------------------
class SimulateConfig(BaseModel):
    """Everything that defines a simulation run (recorded in the run directory, without secrets).

    The agent under test is ``model`` (a spec) or ``agent`` (a plug-in ``module:attr``); the simulated
    user is ``user_model`` or ``user_agent``. ``user_persona``/``scenario`` default to a per-session pick
    from ``prompts/user_personas.yaml`` and the environment pool.
    """

    persona: str = Field(min_length=1, max_length=MAX_PERSONA_CHARS)
    model: str | None = None
    agent: str | None = None
    user_model: str = DEFAULT_USER
    user_agent: str | None = None
    user_persona: str | None = Field(None, max_length=MAX_PERSONA_CHARS)
    scenario: str | None = Field(None, max_length=MAX_PERSONA_CHARS)
    turns: int = Field(4, ge=1, le=MAX_TURNS)
    min_turns: int = Field(1, ge=1, le=MAX_TURNS)  # fewer agent replies: the session is incomplete
    adversarial: bool = False
    judges: list[str] = Field(default_factory=lambda: [DEFAULT_JUDGE])
    sessions: int = Field(1, ge=1, le=10_000)
    concurrency: int = Field(8, ge=1, le=MAX_CONCURRENCY)
    seed: Seed = 0
    allow_self_judging: bool = False
    agent_temperature: float = Field(0.7, ge=0, le=2)
    user_temperature: float = Field(0.9, ge=0, le=2)
    max_agent_tokens: int = Field(256, ge=8, le=8192)
    max_user_tokens: int = Field(128, ge=8, le=8192)
    max_judge_tokens: int = Field(200, ge=16, le=8192)
    max_verdict_tokens: int = Field(600, ge=16, le=8192)
    retry_failed: bool = True  # a resumed run runs sessions with failed items again (False keeps them)

    _persona = field_validator("persona")(persona_description)

    @model_validator(mode="after")
    def _check(self) -> SimulateConfig:
        if self.model and self.agent:
            raise ValueError("give either model or agent, not both")
        if not self.model and not self.agent:
            self.model = DEFAULT_AGENT
        if self.min_turns > self.turns:
            raise ValueError(f"min_turns {self.min_turns} is more than turns {self.turns}")
        self.judges = list(dict.fromkeys(self.judges))
        return self

    @property
    def agent_name(self) -> str:
        return self.agent or self.model or DEFAULT_AGENT

    @property
    def user_name(self) -> str:
        return self.user_agent or self.user_model

    def fingerprint(self) -> str:
        """Identifies the work of one session (not how many sessions, how concurrently, retries, or the turns
        a session needs to count)."""
        data = self.model_dump(exclude={"concurrency", "sessions", "retry_failed", "min_turns"})
        return short_id(json.dumps(data, sort_keys=True))


@dataclass(frozen=True)
class SessionSpec:
    """One session to run: its id (the checkpoint thread) and what the two sides are told."""

    id: str
    index: int
    persona: str
    user_persona: str
    scenario: str
    adversarial: bool
    max_turns: int
    seed: int = 0
    min_turns: int = 1


def session_specs(config: SimulateConfig) -> list[SessionSpec]:
    """The config's sessions; ids are stable, so re-running a config resumes its sessions."""
    fingerprint = config.fingerprint()
    specs = []
    for index in range(config.sessions):
        specs.append(
            SessionSpec(
                id=f"{slug(config.persona, 16)}-{index + 1}-{short_id(fingerprint, str(index))[:8]}",
                index=index,
                persona=config.persona,
                user_persona=config.user_persona or default_user_persona(index, config.seed),
                scenario=config.scenario or default_scenario(index, config.seed),
                adversarial=config.adversarial,
                max_turns=config.turns,
                seed=config.seed + index,
                min_turns=config.min_turns,
            )
        )
    return specs


# --- summary ------------------------------------------------------------------------------------------
def session_numbers(record: dict[str, Any]) -> dict[str, Any]:
    """The per-session line of ``summary.json``."""
    verdict = record.get("session_verdict") or turn_numbers(record["turns"])
    return {
        "id": record["id"],
        "persona": record["persona"],
        "agent": record["agent"],
        "user": record["user"],
        "user_persona": record["user_persona"],
        "scenario": record["scenario"],
        "adversarial": record["adversarial"],
        "status": record["status"],
        "agent_turns": verdict["agent_turns"],
        "min_turns": min_turns(record),
        "failed_turns": verdict["failed_turns"],
        "turns_at_token_limit": verdict.get("turns_at_token_limit", 0),  # 0 for sessions older than the count
        "stop_reason": record["stop_reason"],
        "mean_score": verdict["mean_score"],
        "task_means": verdict["task_means"],
        "drift_slope": verdict["drift_slope"],
        "consistency": verdict.get("consistency"),
        "n_contradictions": verdict.get("n_contradictions"),
        "break": record["break"],
    }


class SimulateSummary(Summary):
    """``summary.json`` of a session run: per-session numbers, the overall ones, the judges that scored."""

    sessions: list[dict[str, Any]] = Field(default_factory=list)
    overall: dict[str, Any] = Field(default_factory=dict)
    judges: list[str] = Field(default_factory=list)
    skipped_judges: list[str] = Field(default_factory=list)
    tokens: list[dict[str, Any]] = Field(default_factory=list)
    # per judge, one line: how its turn scores agreed with people (its validity card), or how to measure it
    judge_validity: dict[str, str] = Field(default_factory=dict)


def build_summary(store: RunStore, session_ids: list[str] | None = None) -> SimulateSummary:
    """Per-session and overall numbers from the store's ``session`` records (optionally some sessions).

    ``overall``: sessions, finished (with at least their ``min_turns`` agent replies), too_short (finished
    with fewer: failed items), agent_turns, failed_turns, turns_at_token_limit (agent replies that used
    their whole max_tokens, judged as they stand), mean_score and task_means (means of the
    session means), drift_slope_mean, consistency_mean, contradictions_mean, break_rate (share of
    finished sessions with a break), breaks_by_level, first_break_turn_mean, stop_reasons.
    """
    records = store.records("session")
    if session_ids is not None:
        wanted = set(session_ids)
        records = [r for r in records if r["id"] in wanted]
        order = {sid: i for i, sid in enumerate(session_ids)}
        records.sort(key=lambda r: order[r["id"]])
    sessions = [session_numbers(r) for r in records]
    finished = [s for s in sessions if s["status"] == "finished"]
    short = [s for s in finished if s["agent_turns"] < s["min_turns"]]  # failed items, never done

    def mean_of(key: str, rows: list[dict[str, Any]]) -> float | None:
        values = [r[key] for r in rows if r[key] is not None]
        return round(float(np.mean(values)), 4) if values else None

    tasks = sorted({t for s in sessions for t in s["task_means"]})
    breaks = [s["break"] for s in finished if s["break"]]
    by_level: dict[str, int] = {}
    for b in breaks:
        key = str(b.get("level")) if b.get("level") else "none"
        by_level[key] = by_level.get(key, 0) + 1
    stops: dict[str, int] = {}
    for s in finished:
        stops[s["stop_reason"] or "unknown"] = stops.get(s["stop_reason"] or "unknown", 0) + 1
    overall = {
        "sessions": session_ids and len(session_ids) or len(sessions),
        "finished": len(finished) - len(short),
        "too_short": len(short),
        "agent_turns": sum(s["agent_turns"] for s in sessions),
        "failed_turns": sum(s["failed_turns"] for s in sessions),
        "turns_at_token_limit": sum(s["turns_at_token_limit"] for s in sessions),
        "mean_score": mean_of("mean_score", sessions),
        "task_means": {
            t: round(float(np.mean(v)), 4)
            for t in tasks
            if (v := [s["task_means"][t] for s in sessions if t in s["task_means"]])
        },
        "drift_slope_mean": mean_of("drift_slope", sessions),
        "consistency_mean": mean_of("consistency", sessions),
        "contradictions_mean": mean_of("n_contradictions", sessions),
        "break_rate": round(len(breaks) / len(finished), 4) if finished else None,
        "breaks_by_level": by_level,
        "first_break_turn_mean": round(float(np.mean([b["turn"] for b in breaks])), 4) if breaks else None,
        "stop_reasons": stops,
    }
    return SimulateSummary(kind=KIND, sessions=sessions, overall=overall, tokens=store.call_stats(),
                           failures=[f for r in records for f in session_failures(r)],
                           incomplete=overall["sessions"] - len(finished))


def min_turns(record: dict[str, Any]) -> int:
    """The agent replies a session needs to count (1 for records older than the field)."""
    return int(record.get("min_turns") or 1)


def session_failures(record: dict[str, Any]) -> list[FailedItem]:
    """A session's failed items: agent (``turns``) and user (``user turns``) turns that failed or came back
    empty, turn scores a judge did not give (``turn verdicts``), failed ``session verdicts``, and a finished
    session with fewer agent replies than its ``min_turns`` (``sessions``): nothing or too little was
    judged, whatever ended it."""
    sid = record["id"]
    failed = []
    turns = record.get("turns", [])
    replies = sum(t.get("role") == "assistant" and t.get("status", "ok") == "ok" for t in turns)
    if record.get("status") == "finished" and replies < min_turns(record):
        failed.append(FailedItem(
            stage="sessions", item=sid, model=record.get("agent") or None,
            reason=f"{replies} agent turn(s), fewer than the {min_turns(record)} a session needs "
                   f"(stopped: {record.get('stop_reason') or 'unknown'})"))
    for turn in turns:
        where = f"{sid}/{turn.get('index')}"
        if turn.get("status", "ok") != "ok":
            agent = turn.get("role") == "assistant"
            failed.append(FailedItem(stage="turns" if agent else "user turns", item=where,
                                     model=record.get("agent" if agent else "user") or None,
                                     reason=turn.get("error") or f"{turn.get('status')} reply"))
        for judge, by_task in (turn.get("scores") or {}).items():
            failed += [FailedItem(stage="turn verdicts", item=f"{where}/{task}/{judge}", model=judge,
                                  reason=(turn.get("rationales") or {}).get(judge, {}).get(task))
                       for task, score in by_task.items() if score is None]
    verdicts = (record.get("session_verdict") or {}).get("judges") or {}
    failed += [FailedItem(stage="session verdicts", item=f"{sid}/{judge}", model=judge,
                          reason=result.get("error"))
               for judge, result in verdicts.items() if result.get("status") != "ok"]
    return failed


# --- running sessions ---------------------------------------------------------------------------------
def check_checkpoint_url(url: str | None) -> None:
    """Refuses a checkpoint URL that is not Postgres (before the run directory is created)."""
    if url and not url.startswith(("postgresql://", "postgres://")):
        raise PersonagraphError(f"--checkpoint-url {redact_url(url)}: expected postgresql://…")


@asynccontextmanager
async def open_checkpointer(run_dir: Path, url: str | None = None) -> AsyncIterator[Any]:
    """The session checkpointer: SQLite in the run directory, or Postgres for ``postgresql://`` URLs."""
    if not url:
        async with sqlite_checkpointer(run_dir) as saver:
            yield saver
        return
    check_checkpoint_url(url)
    try:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver  # optional: the 'postgres' extra
    except ImportError:
        raise PersonagraphError(
            "--checkpoint-url needs langgraph-checkpoint-postgres and psycopg "
            "(the 'postgres' extra of personagraph)"
        ) from None
    try:
        manager = AsyncPostgresSaver.from_conn_string(url)
        saver = await manager.__aenter__()
        await saver.setup()
    except Exception as exc:  # noqa: BLE001 - connection problems are the user's environment
        reason = str(exc).replace(url, redact_url(url))
        if password := urlsplit(url).password:
            reason = reason.replace(password, "***")
        raise PersonagraphError(
            f"--checkpoint-url {redact_url(url)}: cannot connect ({type(exc).__name__}: {reason[:200]})"
        ) from None
    try:
        yield saver
    finally:
        await manager.__aexit__(None, None, None)


@dataclass
class Sides:
    """The agent and user of one session (the session graph takes any Agent and any User)."""

    agent: Agent
    user: User


async def run_session(
    graph: Any, spec: SessionSpec, context: Any, *, judges: list[str], thread_id: str | None = None
) -> dict[str, Any] | None:
    """Runs (or resumes) one session on a compiled session graph (checkpoint thread ``thread_id``, default
    the session id); returns its ``session`` record."""
    thread = {"configurable": {"thread_id": thread_id or spec.id}, "recursion_limit": 4 * spec.max_turns + 20}
    snapshot = await graph.aget_state(thread)
    if snapshot.values and not snapshot.next and snapshot.values.get("result"):
        record = snapshot.values["result"]
        if context.store is not None and record and context.store.get("session", spec.id) is None:
            context.store.put("session", spec.id, record, unit=spec.id)  # e.g. a shared Postgres checkpointer
            if context.transcripts is not None:
                write_transcript(context.transcripts, record)
        context.on_event("session_done", record)
        return record
    if snapshot.next:
        final = await graph.ainvoke(None, thread, context=context, durability="sync")
    else:  # a new session (or a checkpoint that never got past its first step: start it again)
        state = {
            "session_id": spec.id,
            "persona": spec.persona,
            "user_persona": spec.user_persona,
            "scenario": spec.scenario,
            "adversarial": spec.adversarial,
            "max_turns": spec.max_turns,
            "min_turns": spec.min_turns,
            "agent": context.agent.name,
            "user": context.user.name,
            "judges": judges,
            "turns": [],
            "stop_reason": None,
            "result": None,
        }
        final = await graph.ainvoke(state, thread, context=context, durability="sync")
    return final.get("result")


def _record_meta(run: Run, checkpoint_url: str | None, source: str) -> None:
    """What every session run records besides the config: its source, checkpointer, prompts and rubrics."""
    run.record(
        source=source,
        checkpointer=redact_url(checkpoint_url) if checkpoint_url else "sqlite:checkpoints.sqlite",
        prompts={name: load_prompt(name).version for name in PROMPTS}
        | {
            f"rubric:{key}": data_hash(f"judges/rubrics/{key}.yaml")
            for key in (*TURN_RUBRICS, SESSION_RUBRIC)
        }
        | {
            "user_personas": data_hash("prompts/user_personas.yaml"),
            "pool": data_hash("environments/pool.yaml"),
        },
    )


def _finish(run: Run, ids: list[str], judges: list[str], skipped: list[str]) -> SimulateSummary:
    summary = build_summary(run.store, ids)
    summary.judges, summary.skipped_judges = judges, skipped
    summary.judge_validity = validity_lines(judges, None, list(TURN_RUBRICS))
    return run.finish(summary)


EventHook = Callable[[str, dict[str, Any]], None]


async def run(
    config: SimulateConfig,
    run_dir: str | Path,
    *,
    settings: ModelSettings | None = None,
    agent: Agent | None = None,
    user: User | None = None,
    judge_objects: list[Judge] | None = None,
    checkpoint_url: str | None = None,
    on_event: EventHook | None = None,
) -> SimulateSummary:
    """Runs (or resumes) ``config.sessions`` sessions concurrently; returns the summary also written to
    ``summary.json``.

    Args:
        config: what to simulate.
        run_dir: the run directory (created if needed; reused to resume).
        settings: endpoint settings shared by the roles (base URL, API key).
        agent: the agent under test (any ``Agent``); default from ``config.model``/``config.agent``.
        user: the user side (any ``User``); default a simulated user on ``config.user_model``/``user_agent``.
        judge_objects: judge objects (any :class:`~personagraph.judges.base.Judge`), each named in
            ``config.judges``.
        checkpoint_url: ``postgresql://…`` to checkpoint in Postgres instead of the run directory.
        on_event: called with ``("user_turn" | "agent_turn" | "session_done", payload)`` as things finish.
    """
    run_dir = Path(run_dir)
    settings = (settings or ModelSettings()).model_copy(update={"concurrency": config.concurrency})
    given = given_by_name(judge_objects or [], config.judges, "judge_objects", "judges")
    check_judge_names(config.judges, given)
    for spec in [
        *([config.model] if config.model and agent is None else []),
        *([config.user_model] if not config.user_agent and user is None else []),
    ]:
        parse_spec(spec)
    agent_name = agent.name if agent is not None else config.agent_name
    check_self_judging(config.judges, agent_name, config.allow_self_judging)
    plugin_agent = load_plugins([config.agent])[0] if agent is None and config.agent else None
    plugin_user = load_plugins([config.user_agent])[0] if user is None and config.user_agent else None
    check_checkpoint_url(checkpoint_url)
    with Run(KIND, run_dir, config, retry_failed=config.retry_failed) as the_run:
        _record_meta(the_run, checkpoint_url, "simulate")
        the_run.record(
            sides={"agent": agent_name, "user": user.name if user is not None else config.user_name}
        )
        store, meter = the_run.store, the_run.meter

        def client(spec: str, role: str, **overrides: Any) -> ModelClient:
            return ModelClient.create(spec, role, store=store, meter=meter, settings=settings, **overrides)

        common = {"store": store, "meter": meter, "settings": settings, "temperature": 0.0}
        judges = [
            judge_for(spec, "judge", given=given, **common, max_tokens=config.max_judge_tokens)
            for spec in config.judges
        ]
        verdict_judges = [
            judge_for(spec, "session_judge", given=given, **common, max_tokens=config.max_verdict_tokens)
            for spec in config.judges
        ]
        if config.allow_self_judging:
            usable, skipped = judges, []
        else:
            usable, skipped = split_judges(judges, agent_name)
        verdict_judges = [j for j in verdict_judges if j.name in {u.name for u in usable}]
        specs = session_specs(config)
        gate = asyncio.Semaphore(config.concurrency)
        hook = on_event or (lambda kind, payload: None)

        def sides(spec: SessionSpec) -> Sides:
            the_agent = (
                agent
                # a plug-in's replies are stored and cut at the reply budget, as in eval
                or (plugin_agent
                    and CachedAgent(plugin_agent, store, meter, max_tokens=config.max_agent_tokens))
                or PersonaAgent(
                    client(
                        config.model or DEFAULT_AGENT,
                        "persona",
                        temperature=config.agent_temperature,
                        max_tokens=config.max_agent_tokens,
                        seed=spec.seed,
                    )
                )
            )
            the_user = user or SimulatedUser(
                plugin_user
                or client(
                    config.user_model,
                    "user_sim",
                    temperature=config.user_temperature,
                    max_tokens=config.max_user_tokens,
                    seed=spec.seed,
                ),
                name=config.user_name,
            )
            return Sides(the_agent, the_user)

        async with open_checkpointer(run_dir, checkpoint_url) as saver:
            graph = build_graph().compile(checkpointer=saver)

            def thread_for(spec: SessionSpec) -> str:
                """The session's checkpoint thread: a fresh one for each retry of a session with failures."""
                attempts = (store.get(RETRY_KIND, spec.id) or {}).get("attempts", 0)
                stored = store.get("session", spec.id)
                if stored and stored["status"] == "finished" and the_run.pending(session_failures(stored)):
                    attempts += 1
                    store.put(RETRY_KIND, spec.id, {"attempts": attempts}, unit=spec.id)
                return f"{spec.id}-retry{attempts}" if attempts else spec.id

            async def one(spec: SessionSpec) -> None:
                pair = sides(spec)
                context = SessionContext(
                    agent=pair.agent,
                    user=pair.user,
                    judges=usable,
                    verdict_judges=verdict_judges,
                    skipped_judges=skipped,
                    store=store,
                    transcripts=run_dir / "transcripts",
                    on_event=hook,
                )
                async with gate:
                    await run_session(graph, spec, context, judges=[j.name for j in usable],
                                      thread_id=thread_for(spec))

            results = await asyncio.gather(*(one(s) for s in specs), return_exceptions=True)
            for result in results:
                if isinstance(result, BaseException):
                    raise result
        return _finish(the_run, [s.id for s in specs], [j.name for j in usable], skipped)


run_sync = synchronous(run)


async def judge_session(
    path: str | Path,
    run_dir: str | Path,
    *,
    judges: list[str] | None = None,
    judge_objects: list[Judge] | None = None,
    persona: str | None = None,
    settings: ModelSettings | None = None,
    allow_self_judging: bool = False,
    on_progress: ProgressHandler | None = None,
) -> SimulateSummary:
    """Judges a saved transcript (``chat``/``simulate`` JSONL): per-turn scores and the session verdict,
    written as a ``session`` record, transcripts and ``summary.json`` in ``run_dir``; ``on_progress``
    receives a ``turns`` event per judged agent turn and a ``session verdict`` one; ``judge_objects``: judge
    objects, each named in ``judges``."""
    transcript = read_transcript(path)
    persona = " ".join((persona or transcript["persona"]).split())
    if not persona:
        raise PersonagraphError(f"{path}: the transcript names no persona; pass --persona")
    judge_specs = list(dict.fromkeys(judges or [DEFAULT_JUDGE]))
    given = given_by_name(judge_objects or [], judge_specs, "judge_objects", "judges")
    check_judge_names(judge_specs, given)
    check_self_judging(judge_specs, transcript["agent"], allow_self_judging)
    run_dir = Path(run_dir)
    config = SimulateConfig(
        persona=persona,
        model=transcript["agent"] or None,
        judges=judge_specs,
        turns=max(1, max(e["index"] for e in transcript["turns"])),
        allow_self_judging=allow_self_judging,
    )
    with Run(KIND, run_dir, config, on_progress=on_progress) as the_run:
        _record_meta(the_run, None, "judge-session")
        the_run.record(transcript=str(path))
        store, meter = the_run.store, the_run.meter
        settings = settings or ModelSettings()
        common = {"store": store, "meter": meter, "settings": settings, "temperature": 0.0}
        clients = [judge_for(s, "judge", given=given, **common, max_tokens=200) for s in judge_specs]
        usable, skipped = (clients, []) if allow_self_judging else split_judges(clients, transcript["agent"])
        turns = [dict(e) for e in transcript["turns"]]
        the_run.expect("turns", sum(e["role"] != "user" for e in turns))
        the_run.expect("session verdict", 1)
        last_user = ""
        for entry in turns:
            if entry["role"] == "user":
                last_user = entry["text"]
                continue
            entry["refusal_marker"] = detect_refusal(entry["text"]) if entry["status"] == "ok" else None
            if entry["status"] == "ok" and entry["text"].strip() and usable:
                entry["scores"], entry["rationales"] = await score_turn(
                    usable, persona, last_user, entry["text"]
                )
            the_run.advance("turns")
        verdict_clients = [
            judge_for(j.name, "session_judge", given=given, **common, max_tokens=600) for j in usable
        ]
        verdict = await session_verdict(verdict_clients, persona, turns, skipped)
        the_run.advance("session verdict")
        values = {
            **transcript,
            "session_id": transcript["id"],
            "persona": persona,
            "turns": turns,
            "judges": [j.name for j in usable],
            "stop_reason": None,
        }
        ended = next((e for e in turns if e["role"] == "user" and e.get("stop")), None)
        values["stop_reason"] = "user_stop" if ended else None
        record = session_record(values, status="finished", verdict=verdict)
        for entry in turns:
            store.put(
                "turn",
                f"{record['id']}:{entry['index']}:{entry['role']}",
                {**entry, "session_id": record["id"]},
                unit=record["id"],
            )
        store.put("session", record["id"], record, unit=record["id"])
        write_transcript(run_dir / "transcripts", record)
        return _finish(the_run, [record["id"]], [j.name for j in usable], skipped)


async def chat(
    persona: str,
    agent: Agent,
    user: User,
    run_dir: str | Path,
    *,
    max_turns: int = 50,
    judges: list[ModelClient] | None = None,
    on_event: EventHook | None = None,
    session_id: str | None = None,
) -> dict[str, Any]:
    """One conversation between ``agent`` and ``user`` (in ``personagraph chat``, a human), on the
    session graph; the transcript is saved (``<run_dir>/transcripts/<id>.jsonl``) for ``judge_session``.
    Returns the ``session`` record."""
    persona = parse_persona(persona, "--persona").description
    run_dir = Path(run_dir)
    judges = list(judges or [])
    usable, skipped = split_judges(judges, agent.name)
    sid = session_id or f"chat-{slug(persona, 16)}-{time.strftime('%Y%m%d-%H%M%S')}"
    spec = SessionSpec(
        id=sid,
        index=0,
        persona=persona,
        user_persona="a person typing in the terminal",
        scenario="a live chat",
        adversarial=False,
        max_turns=max_turns,
    )
    config = SimulateConfig(
        persona=persona,
        model=agent.name,
        user_model=user.name,
        judges=[j.name for j in usable],
        turns=max_turns,
    )
    with Run(KIND, run_dir, config) as the_run:
        _record_meta(the_run, None, "chat")
        store = the_run.store
        async with open_checkpointer(run_dir) as saver:
            graph = build_graph().compile(checkpointer=saver)
            context = SessionContext(
                agent=agent,
                user=user,
                judges=usable,
                skipped_judges=skipped,
                store=store,
                transcripts=run_dir / "transcripts",
                on_event=on_event or (lambda kind, payload: None),
            )
            record = await run_session(graph, spec, context, judges=[j.name for j in usable])
        return record or {}
