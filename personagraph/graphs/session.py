"""A multi-turn session as a LangGraph StateGraph: the user side ↔ the agent under test, turn by turn.

    START → start → user ─┬→ agent → judge ─┬→ user …
                          └→ verdict → END  └→ verdict → END

``start`` fills what the input leaves out (session id, turn limit, who takes part: a Studio run gives
only the persona); ``user`` writes the next user message (a simulated user, a plug-in, or a human in
``chat``); ``agent`` asks any :class:`~personagraph.agents.base.Agent` for its reply; ``judge`` scores
the reply with the judges and records the turn; ``verdict`` adds the session-level verdict and the
``session`` record.

Stop rules: ``max_turns`` agent replies; the user ending the conversation (the stop token); an empty or
failed user or agent turn — recorded with its reason, never a crash. Each finished turn is written to
the run store (``turn`` records and the running ``session`` record) and to the transcript files. With a
checkpointer, ``thread_id`` is the session id and an interrupted session resumes from its last step.
The graph is agnostic of both sides: anything speaking the ``Agent``/``User`` protocols plugs in.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Required

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from typing_extensions import TypedDict  # Studio reads typing's only on Python ≥ 3.12

from personagraph.agents.base import Agent
from personagraph.agents.user_sim import User, UserView, level_for_turn
from personagraph.errors import PersonagraphError
from personagraph.graphs import live_context
from personagraph.judges.refusal import detect_refusal
from personagraph.judges.session import score_turn, session_record, session_verdict
from personagraph.models import ModelClient
from personagraph.store import RunStore
from personagraph.transcripts import write_transcript

DEFAULT_TURNS = 4  # agent replies when the input does not say


@dataclass
class SessionContext:
    """What the nodes need besides the state: the two sides, the judges, the store, the hooks.

    ``judges`` score agent turns (already without the agent's own model); ``verdict_judges`` give the
    session verdict (default: ``judges``). ``store``/``transcripts`` are optional (None: not written).
    """

    agent: Agent
    user: User
    judges: list[ModelClient] = field(default_factory=list)
    verdict_judges: list[ModelClient] | None = None
    skipped_judges: list[str] = field(default_factory=list)
    store: RunStore | None = None
    transcripts: Path | None = None
    on_event: Callable[[str, dict[str, Any]], None] = field(default=lambda kind, payload: None)


class SessionState(TypedDict, total=False):
    session_id: str
    persona: str
    user_persona: str
    scenario: str
    adversarial: bool
    max_turns: int
    min_turns: int
    agent: str
    user: str
    judges: list[str]
    turns: list[dict[str, Any]]
    stop_reason: str | None
    result: dict[str, Any] | None


class SessionInput(TypedDict, total=False):
    """What a person gives a run (Studio's input form): the persona (required) and, optionally, the turn
    limit, the user's scenario and persona, and adversarial pressure."""

    persona: Required[str]
    max_turns: int
    scenario: str
    user_persona: str
    adversarial: bool


class SessionOutput(TypedDict, total=False):
    """What a run returns to a person: the session's id, its turns (each with its scores), why it stopped,
    and the session verdict (consistency, contradictions, drift, the first break)."""

    session_id: str
    turns: list[dict[str, Any]]
    stop_reason: str | None
    result: dict[str, Any] | None


def _ctx(runtime: Runtime[SessionContext]) -> SessionContext:
    return live_context(runtime, SessionContext)


def _turn(state: SessionState) -> int:
    return sum(e["role"] == "user" for e in state.get("turns", []))


def _save(
    ctx: SessionContext,
    state: SessionState,
    entry: dict[str, Any],
    turns: list[dict[str, Any]],
    stop_reason: str | None,
) -> None:
    """Writes one finished turn: its ``turn`` record, the running ``session`` record and the transcript."""
    sid = state["session_id"]
    record = session_record({**state, "turns": turns, "stop_reason": stop_reason}, status="running")
    if ctx.store is not None:
        ctx.store.put(
            "turn", f"{sid}:{entry['index']}:{entry['role']}", {**entry, "session_id": sid}, unit=sid
        )
        ctx.store.put("session", sid, record, unit=sid)
    if ctx.transcripts is not None:
        write_transcript(ctx.transcripts, record)


# --- nodes ------------------------------------------------------------------------------------------
async def start(state: SessionState, runtime: Runtime[SessionContext]) -> dict[str, Any]:
    """Fills what a Studio input may leave out: the session id, the turn limit, who takes part."""
    ctx = _ctx(runtime)
    return {
        "session_id": state.get("session_id") or uuid.uuid4().hex[:12],
        "max_turns": state.get("max_turns") or DEFAULT_TURNS,
        "min_turns": state.get("min_turns") or 1,
        "agent": state.get("agent") or ctx.agent.name,
        "user": state.get("user") or ctx.user.name,
        "judges": state.get("judges") or [j.name for j in ctx.judges],
    }


async def user(state: SessionState, runtime: Runtime[SessionContext]) -> dict[str, Any]:
    ctx = _ctx(runtime)
    turns = list(state.get("turns", []))
    index = _turn(state) + 1
    level = level_for_turn(index, state["max_turns"]) if state.get("adversarial") else None
    history = [{"role": e["role"], "content": e["text"]} for e in turns if e["status"] == "ok" and e["text"]]
    view = UserView(
        persona=state["persona"],
        user_persona=state.get("user_persona", ""),
        scenario=state.get("scenario", ""),
        turn=index,
        max_turns=state["max_turns"],
        history=history,
        level=level,
    )
    try:
        said = await ctx.user.next_message(view)
        status, text, stop, error = said.status, said.text, said.stop, said.error
    except PersonagraphError:  # bad input (a person's stdin that is not text): the run stops with its line
        raise
    except Exception as exc:  # noqa: BLE001 - a broken user side ends the session, recorded
        status, text, stop, error = "failed", "", False, f"{type(exc).__name__}: {exc}"[:500]
    entry = {
        "index": index,
        "role": "user",
        "text": text,
        "status": status,
        "error": error,
        "level": level,
        "stop": stop,
    }
    turns.append(entry)
    stop_reason = {"failed": "user_failed", "empty": "user_empty"}.get(status) or (
        "user_stop" if stop else None
    )
    _save(ctx, state, entry, turns, stop_reason)
    ctx.on_event("user_turn", {"session_id": state["session_id"], **entry})
    return {"turns": turns, "stop_reason": stop_reason}


async def agent(state: SessionState, runtime: Runtime[SessionContext]) -> dict[str, Any]:
    ctx = _ctx(runtime)
    turns = list(state.get("turns", []))
    index = _turn(state)
    conversation = [
        {"role": e["role"], "content": e["text"]} for e in turns if e["status"] == "ok" and e["text"]
    ]
    try:
        reply = await ctx.agent.respond(state["persona"], conversation)
        status = "ok" if reply.ok else "failed"
        text, error = (reply.text.strip() if reply.ok else ""), reply.error
        cut = reply.ok and reply.at_token_limit
    except PersonagraphError:  # the agent's configuration is wrong (its line says what to set): the run stops
        raise
    except Exception as exc:  # noqa: BLE001 - an agent must not crash the session: a failed turn
        status, text, error, cut = "failed", "", f"{type(exc).__name__}: {exc}"[:500], False
    if status == "ok" and not text:
        status, error = "empty", "empty reply"
    entry = {
        "index": index,
        "role": "assistant",
        "text": text,
        "status": status,
        "error": error,
        "level": turns[-1].get("level") if turns else None,
        "stop": False,
        "refusal_marker": detect_refusal(text) if text else None,
        "at_token_limit": cut,  # the reply used the whole max_tokens: cut off, judged as it stands
        "scores": {},
        "rationales": {},
    }
    stop_reason = {"failed": "agent_failed", "empty": "agent_empty"}.get(status)
    return {"turns": [*turns, entry], "stop_reason": stop_reason}


async def judge(state: SessionState, runtime: Runtime[SessionContext]) -> dict[str, Any]:
    ctx = _ctx(runtime)
    turns = list(state.get("turns", []))
    entry = dict(turns[-1])
    if entry["status"] == "ok" and ctx.judges:
        question = next((e["text"] for e in reversed(turns) if e["role"] == "user"), "")
        entry["scores"], entry["rationales"] = await score_turn(
            ctx.judges, state["persona"], question, entry["text"]
        )
    turns[-1] = entry
    stop_reason = state.get("stop_reason")
    if stop_reason is None and entry["index"] >= state["max_turns"]:
        stop_reason = "max_turns"
    _save(ctx, state, entry, turns, stop_reason)
    ctx.on_event("agent_turn", {"session_id": state["session_id"], **entry})
    return {"turns": turns, "stop_reason": stop_reason}


async def verdict(state: SessionState, runtime: Runtime[SessionContext]) -> dict[str, Any]:
    ctx = _ctx(runtime)
    judges = ctx.judges if ctx.verdict_judges is None else ctx.verdict_judges
    result = await session_verdict(judges, state["persona"], state.get("turns", []), ctx.skipped_judges)
    record = session_record(dict(state), status="finished", verdict=result)
    if ctx.store is not None:
        ctx.store.put("session", state["session_id"], record, unit=state["session_id"])
    if ctx.transcripts is not None:
        write_transcript(ctx.transcripts, record)
    ctx.on_event("session_done", record)
    return {"result": record}


# --- routing ----------------------------------------------------------------------------------------
def after_user(state: SessionState) -> str:
    return "verdict" if state.get("stop_reason") else "agent"


def after_judge(state: SessionState) -> str:
    return "verdict" if state.get("stop_reason") else "user"


def build_graph(
    context_schema: type = SessionContext, input_schema: type | None = None, output_schema: type | None = None
) -> StateGraph:
    """The uncompiled session graph (compile it with a checkpointer to make sessions resumable).

    ``context_schema``: what runs pass as ``context``: a SessionContext, or settings that build one
    (``personagraph.studio``, for ``langgraph dev``); ``input_schema``/``output_schema``: what a run takes and
    returns (default: the whole state; Studio's form asks for the input schema's fields).
    """
    graph = StateGraph(SessionState, context_schema=context_schema, input_schema=input_schema or SessionState,
                       output_schema=output_schema or SessionState)
    graph.add_node("start", start)
    graph.add_node("user", user)
    graph.add_node("agent", agent)
    graph.add_node("judge", judge)
    graph.add_node("verdict", verdict)
    graph.add_edge(START, "start")
    graph.add_edge("start", "user")
    graph.add_conditional_edges("user", after_user, ["agent", "verdict"])
    graph.add_edge("agent", "judge")
    graph.add_conditional_edges("judge", after_judge, ["user", "verdict"])
    graph.add_edge("verdict", END)
    return graph

