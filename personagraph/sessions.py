"""Multi-turn persona sessions: ``simulate`` (simulated user ↔ agent), ``judge_session`` (a saved
transcript), and what both share: turn judging, the session verdict, transcripts and the summary.

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
     scores: {judge: {task: int|None}} (assistant), rationales: {judge: {task: str}} (assistant),
     session_id: str}

``session`` (id = session id, unit = session id), rewritten after every turn (``status="running"``) and
at the end (``status="finished"``)::

    {id, persona, user_persona, scenario, adversarial: bool, max_turns, agent, user, judges: [spec],
     status: "running"|"finished", turns: [entry as above, without session_id], stop_reason:
     "max_turns"|"user_stop"|"user_failed"|"user_empty"|"agent_failed"|"agent_empty"|None,
     break: {level, turn, source: "refusal_marker"|"judge", marker} | None, drift_slope: float|None,
     session_verdict: {judges: {judge: {status, score, rationale, contradictions: [{earlier_turn,
     later_turn, description}], error}}, skipped_judges: [spec], consistency: float|None (mean session
     score, 1–5), contradictions: [{judge, earlier_turn, later_turn, description}], n_contradictions:
     float|None (mean count over judges that answered), task_means: {task: float}, mean_score:
     float|None, turn_means: [{turn, score}], drift_slope, drift_by_task: {task: float|None},
     breaks: [{turn, level, source, marker}], agent_turns, failed_turns}}

``summary.json``: ``{kind: "simulate", sessions: [per-session numbers], overall: {...}, judges,
skipped_judges, llm_calls, cache_hits, wall_time_s, roles, tokens, run_dir}`` (see :func:`build_summary`).

Transcripts: ``<run_dir>/transcripts/<session>.jsonl`` (a ``header`` line, one ``turn`` line per entry,
an ``end`` line once finished) and ``<session>.md``.
"""

from __future__ import annotations

import asyncio
import html
import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import numpy as np
from pydantic import BaseModel, Field, model_validator

from personagraph.version import __version__
from personagraph.agents.base import Agent
from personagraph.agents.persona import PersonaAgent
from personagraph.agents.user_sim import (
    LEVELS,
    SimulatedUser,
    User,
    default_scenario,
    default_user_persona,
)
from personagraph.errors import PersonagraphError
from personagraph.files import read_jsonl, read_text
from personagraph.judges.judge import score_response
from personagraph.judges.refusal import detect_refusal
from personagraph.judges.rubrics import load_rubric
from personagraph.models import Meter, ModelClient, ModelSettings, parse_spec
from personagraph.prompts import load_prompt
from personagraph.resources import data_hash
from personagraph.schemas import capped_text, short_id, slug
from personagraph.store import RunStore

DEFAULT_AGENT = "local:qwen2.5-coder-0.5b"
DEFAULT_USER = "local:qwen2.5-coder-1.5b"
DEFAULT_JUDGE = "local:qwen2.5-coder-1.5b"
TURN_RUBRICS = ("persona_consistency", "linguistic_habits")
SESSION_RUBRIC = "session_consistency"
PROMPTS = ("persona", "user_sim", "user_adversarial", "judge", "session_verdict")
TRANSCRIPT_FORMAT = "personagraph-transcript/1"


# --- config -----------------------------------------------------------------------------------------
class SimulateConfig(BaseModel):
    """Everything that defines a simulation run (recorded in the run directory, without secrets).

    The agent under test is ``model`` (a spec) or ``agent`` (a plug-in ``module:attr``); the simulated
    user is ``user_model`` or ``user_agent``. ``user_persona``/``scenario`` default to a per-session pick
    from ``prompts/user_personas.yaml`` and the environment pool.
    """

    persona: str = Field(min_length=1, max_length=4000)
    model: str | None = None
    agent: str | None = None
    user_model: str = DEFAULT_USER
    user_agent: str | None = None
    user_persona: str | None = None
    scenario: str | None = None
    turns: int = Field(4, ge=1, le=200)
    adversarial: bool = False
    judges: list[str] = Field(default_factory=lambda: [DEFAULT_JUDGE])
    sessions: int = Field(1, ge=1, le=10_000)
    concurrency: int = Field(8, ge=1, le=1024)
    seed: int = 0
    allow_self_judging: bool = False
    agent_temperature: float = Field(0.7, ge=0, le=2)
    user_temperature: float = Field(0.9, ge=0, le=2)
    max_agent_tokens: int = Field(256, ge=8, le=8192)
    max_user_tokens: int = Field(128, ge=8, le=8192)
    max_judge_tokens: int = Field(200, ge=16, le=8192)
    max_verdict_tokens: int = Field(600, ge=16, le=8192)

    @model_validator(mode="after")
    def _check(self) -> SimulateConfig:
        self.persona = " ".join(self.persona.split())
        if not self.persona:
            raise ValueError("persona: empty")
        if self.model and self.agent:
            raise ValueError("give either model or agent, not both")
        if not self.model and not self.agent:
            self.model = DEFAULT_AGENT
        self.judges = list(dict.fromkeys(self.judges))
        return self

    @property
    def agent_name(self) -> str:
        return self.agent or self.model or DEFAULT_AGENT

    @property
    def user_name(self) -> str:
        return self.user_agent or self.user_model

    def fingerprint(self) -> str:
        """Identifies the work of one session (not how many sessions or how concurrently)."""
        data = self.model_dump(exclude={"concurrency", "sessions"})
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
            )
        )
    return specs


# --- judging ------------------------------------------------------------------------------------------
def split_judges(judges: list[ModelClient], agent_name: str) -> tuple[list[ModelClient], list[str]]:
    """Judges that may score ``agent_name``'s turns, and the specs skipped because they are its model."""
    usable = [j for j in judges if str(j.spec) != agent_name]
    skipped = [str(j.spec) for j in judges if str(j.spec) == agent_name]
    return usable, skipped


def check_self_judging(judges: list[str], agent_name: str, allow: bool) -> None:
    """Refuses a judge that is the agent's own model, unless self-judging is allowed."""
    if not allow and agent_name in judges:
        raise PersonagraphError(
            f"judge {agent_name} is also the agent's model; judges never see their own model's turns — "
            "choose another --judge or pass --allow-self-judging"
        )


async def score_turn(
    judges: list[ModelClient], persona: str, question: str, response: str
) -> tuple[dict[str, dict[str, int | None]], dict[str, dict[str, str]]]:
    """Scores one agent turn with every judge on the turn rubrics (the same rubrics and judge call as
    ``eval``). Returns ``(scores, rationales)``: ``{judge: {task: score or None}}`` and the rationales
    (a failed verdict is ``None`` with its error as rationale, never a score)."""
    rubrics = [load_rubric(key) for key in TURN_RUBRICS]
    jobs = [(judge, rubric) for judge in judges for rubric in rubrics]
    results = await asyncio.gather(
        *(
            score_response(judge, rubric, persona=persona, question=question, response=response)
            for judge, rubric in jobs
        )
    )
    scores: dict[str, dict[str, int | None]] = {}
    rationales: dict[str, dict[str, str]] = {}
    for (judge, rubric), scored in zip(jobs, results, strict=True):
        name = str(judge.spec)
        scores.setdefault(name, {})[rubric.task] = scored.score if scored.status == "ok" else None
        rationales.setdefault(name, {})[rubric.task] = (
            scored.rationale if scored.status == "ok" else f"(verdict failed: {scored.error})"
        )
    return scores, rationales


# Caps in the schema only, as in personagraph.schemas (llama.cpp's grammar keeps a small judge short).
class Contradiction(BaseModel):
    earlier_turn: int = Field(description="number of the earlier agent turn")
    later_turn: int = Field(description="number of the later agent turn that contradicts it")
    description: capped_text(200) = Field(description="what the agent said differently")  # type: ignore[valid-type]


class SessionJudgeReply(BaseModel):
    """The session judge's structured reply (rationale first, then the contradictions and the score)."""

    rationale: capped_text(400) = Field(  # type: ignore[valid-type]
        description="two or three sentences on how consistently the persona was held"
    )
    contradictions: list[Contradiction] = Field(
        description="pairs of agent turns that contradict each other (empty list if none)",
        json_schema_extra={"maxItems": 6},
    )
    score: int = Field(ge=1, le=5, description="the score")


JUDGE_TURN_CHARS = 600  # per turn in the session judge's transcript: long sessions must fit a 4k context


def _clip(text: str, limit: int = JUDGE_TURN_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def transcript_for_judge(turns: list[dict[str, Any]]) -> str:
    """The conversation as the session judge reads it: agent turns numbered, user turns as context
    (each turn clipped to ``JUDGE_TURN_CHARS`` characters)."""
    lines = []
    for entry in turns:
        if entry["status"] != "ok" or not entry["text"]:
            continue
        if entry["role"] == "user":
            lines.append(f"User: {_clip(entry['text'])}")
        else:
            lines.append(f"Agent turn {entry['index']}: {_clip(entry['text'])}")
    return "\n".join(lines)


async def judge_contradictions(
    judge: ModelClient, persona: str, turns: list[dict[str, Any]]
) -> dict[str, Any]:
    """One judge's session-level verdict: contradictions between agent turns and a 1–5 score."""
    rubric = load_rubric(SESSION_RUBRIC)
    messages = load_prompt("session_verdict").messages(
        task=rubric.task,
        rubric=rubric.text(),
        persona=persona,
        transcript=transcript_for_judge(turns),
        low=rubric.scale[0],
        high=rubric.scale[1],
    )
    reply = await judge.structured(messages, SessionJudgeReply)
    if not reply.ok or reply.value is None:
        return {
            "status": "failed",
            "score": None,
            "rationale": "",
            "contradictions": [],
            "error": reply.error,
        }
    agent_turns = {e["index"] for e in turns if e["role"] == "assistant" and e["status"] == "ok"}
    found = []
    for item in reply.value.contradictions:
        earlier, later = sorted((item.earlier_turn, item.later_turn))
        if earlier != later and earlier in agent_turns and later in agent_turns and item.description.strip():
            found.append(
                {"earlier_turn": earlier, "later_turn": later, "description": item.description.strip()}
            )
    return {
        "status": "ok",
        "score": reply.value.score,
        "rationale": reply.value.rationale.strip(),
        "contradictions": found,
        "error": None,
    }


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


def drift(points: list[tuple[int, float]]) -> float | None:
    """The least-squares slope of score against turn number (score points per turn); None with fewer
    than two turns."""
    if len({x for x, _ in points}) < 2:
        return None
    x = np.asarray([p[0] for p in points], dtype=float)
    y = np.asarray([p[1] for p in points], dtype=float)
    return round(float(np.polyfit(x, y, 1)[0]), 4)


def find_breaks(turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Agent turns that break character: a persona-break phrase (AI disclosure, refusal to role-play),
    or every judge scoring Persona Consistency 1."""
    task = load_rubric("persona_consistency").task
    breaks = []
    for entry in turns:
        if entry["role"] != "assistant" or entry["status"] != "ok":
            continue
        if entry.get("refusal_marker"):
            breaks.append(
                {
                    "turn": entry["index"],
                    "level": entry.get("level"),
                    "source": "refusal_marker",
                    "marker": entry["refusal_marker"],
                }
            )
            continue
        pc = [s[task] for s in (entry.get("scores") or {}).values() if s.get(task) is not None]
        if pc and max(pc) <= 1:
            breaks.append(
                {"turn": entry["index"], "level": entry.get("level"), "source": "judge", "marker": None}
            )
    return breaks


def turn_numbers(turns: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-turn means, task means, drift and breaks: everything computed without a model call."""
    agent = [e for e in turns if e["role"] == "assistant"]
    per_task: dict[str, list[tuple[int, float]]] = {}
    turn_means = []
    for entry in agent:
        values = []
        for scores in (entry.get("scores") or {}).values():
            for task, score in scores.items():
                if score is not None:
                    per_task.setdefault(task, []).append((entry["index"], float(score)))
                    values.append(float(score))
        if values:
            turn_means.append({"turn": entry["index"], "score": round(float(np.mean(values)), 4)})
    task_means = {task: round(float(np.mean([v for _, v in pts])), 4) for task, pts in per_task.items()}
    breaks = find_breaks(turns)
    return {
        "agent_turns": sum(e["status"] == "ok" for e in agent),
        "failed_turns": sum(e["status"] != "ok" for e in turns),
        "turn_means": turn_means,
        "task_means": task_means,
        "mean_score": round(float(np.mean([t["score"] for t in turn_means])), 4) if turn_means else None,
        "drift_slope": drift([(t["turn"], t["score"]) for t in turn_means]),
        "drift_by_task": {task: drift(pts) for task, pts in per_task.items()},
        "breaks": breaks,
    }


async def session_verdict(
    judges: list[ModelClient], persona: str, turns: list[dict[str, Any]], skipped: list[str] | None = None
) -> dict[str, Any]:
    """The session-level verdict: contradictions (per judge), consistency, drift and character breaks."""
    numbers = turn_numbers(turns)
    ok_turns = [e for e in turns if e["role"] == "assistant" and e["status"] == "ok"]
    by_judge: dict[str, Any] = {}
    if judges and ok_turns:
        results = await asyncio.gather(*(judge_contradictions(j, persona, turns) for j in judges))
        by_judge = {str(j.spec): r for j, r in zip(judges, results, strict=True)}
    answered = [r for r in by_judge.values() if r["status"] == "ok"]
    return {
        "judges": by_judge,
        "skipped_judges": list(skipped or []),
        "consistency": _mean([r["score"] for r in answered]),
        "contradictions": [{"judge": name, **c} for name, r in by_judge.items() for c in r["contradictions"]],
        "n_contradictions": _mean([len(r["contradictions"]) for r in answered]),
        **numbers,
    }


def first_break(breaks: list[dict[str, Any]]) -> dict[str, Any] | None:
    return dict(min(breaks, key=lambda b: b["turn"])) if breaks else None


# --- records and transcripts ---------------------------------------------------------------------------
def session_record(
    values: dict[str, Any], *, status: str, verdict: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The ``session`` record for a graph state (see the module docstring for the fields)."""
    turns = [dict(e) for e in values.get("turns", [])]
    numbers = verdict or turn_numbers(turns)
    return {
        "id": values["session_id"],
        "persona": values["persona"],
        "user_persona": values.get("user_persona", ""),
        "scenario": values.get("scenario", ""),
        "adversarial": bool(values.get("adversarial")),
        "max_turns": values.get("max_turns"),
        "agent": values.get("agent", ""),
        "user": values.get("user", ""),
        "judges": list(values.get("judges", [])),
        "status": status,
        "turns": turns,
        "stop_reason": values.get("stop_reason"),
        "break": first_break(numbers["breaks"]),
        "drift_slope": numbers["drift_slope"],
        "session_verdict": verdict,
    }


def _md(text: str) -> str:
    """Model text for Markdown: HTML-escaped, every line quoted."""
    return (
        "\n".join(f"> {line}" if line else ">" for line in html.escape(text, quote=False).splitlines()) or ">"
    )


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=False)


def transcript_markdown(record: dict[str, Any]) -> str:
    """A readable transcript of a session record."""
    lines = [
        f"# Session {record['id']}",
        "",
        f"- **Persona:** {_esc(record['persona'])}",
        f"- **Agent:** `{record['agent']}` · **User:** `{record['user']}` — {_esc(record['user_persona'])}",
        f"- **Scenario:** {_esc(record['scenario'])}",
        f"- **Adversarial:** {'yes' if record['adversarial'] else 'no'}",
        f"- **Status:** {record['status']} · **stop:** {record['stop_reason'] or '—'}",
    ]
    if record["break"]:
        b = record["break"]
        lines.append(
            f"- **Character break:** turn {b['turn']}"
            + (f", level {b['level']}" if b.get("level") else "")
            + f" ({b['source']}{': ' + _esc(b['marker']) if b.get('marker') else ''})"
        )
    elif record["status"] == "finished":
        lines.append("- **Character break:** none")
    if record["drift_slope"] is not None:
        lines.append(f"- **Drift:** {record['drift_slope']:+.3f} score points per turn")
    current = None
    for entry in record["turns"]:
        if entry["index"] != current:
            current = entry["index"]
            level = f" · level {entry['level']} ({LEVELS[entry['level']]})" if entry.get("level") else ""
            lines += ["", f"## Turn {current}{level}"]
        who = "User" if entry["role"] == "user" else "Agent"
        if entry["status"] != "ok":
            lines += ["", f"**{who}:** _({entry['status']}: {_esc(entry.get('error') or 'no text')})_"]
            continue
        lines += ["", f"**{who}:**", "", _md(entry["text"]) if entry["text"] else "> _(no text)_"]
        if entry.get("stop"):
            lines += ["", "_(the user ended the conversation)_"]
        if entry.get("refusal_marker"):
            lines += ["", f"_persona break: “{_esc(entry['refusal_marker'])}”_"]
        for judge, scores in (entry.get("scores") or {}).items():
            shown = ", ".join(f"{task} {'—' if s is None else s}" for task, s in scores.items())
            lines += ["", f"_Scores by `{judge}`: {shown}_"]
    verdict = record.get("session_verdict")
    if verdict:
        lines += ["", "## Session verdict", ""]
        if verdict.get("consistency") is not None:
            lines.append(f"- Session consistency: {verdict['consistency']:.2f} / 5")
        if verdict.get("mean_score") is not None:
            lines.append(f"- Mean turn score: {verdict['mean_score']:.2f} / 5")
        for task, mean in verdict.get("task_means", {}).items():
            lines.append(f"- {task}: {mean:.2f}")
        if verdict.get("skipped_judges"):
            lines.append(f"- Skipped (own model): {', '.join(verdict['skipped_judges'])}")
        lines.append(f"- Contradictions: {len(verdict.get('contradictions', []))}")
        for c in verdict.get("contradictions", []):
            lines.append(
                f"  - turns {c['earlier_turn']} → {c['later_turn']} (`{c['judge']}`): "
                f"{_esc(c['description'])}"
            )
        for name, result in verdict.get("judges", {}).items():
            if result.get("rationale"):
                lines.append(f"- `{name}`: {_esc(result['rationale'])}")
    return "\n".join(lines) + "\n"


def write_transcript(folder: Path, record: dict[str, Any]) -> tuple[Path, Path]:
    """Writes ``<id>.jsonl`` and ``<id>.md`` for a session record (atomically replaced)."""
    folder.mkdir(parents=True, exist_ok=True)
    header = {
        "type": "header",
        "format": TRANSCRIPT_FORMAT,
        **{
            k: record[k]
            for k in (
                "id",
                "persona",
                "user_persona",
                "scenario",
                "adversarial",
                "max_turns",
                "agent",
                "user",
                "judges",
                "status",
            )
        },
    }
    lines = [json.dumps(header, ensure_ascii=False)]
    lines += [json.dumps({"type": "turn", **entry}, ensure_ascii=False) for entry in record["turns"]]
    if record["status"] == "finished":
        end = {
            "type": "end",
            **{k: record[k] for k in ("stop_reason", "break", "drift_slope", "session_verdict")},
        }
        lines.append(json.dumps(end, ensure_ascii=False))
    jsonl, md = folder / f"{record['id']}.jsonl", folder / f"{record['id']}.md"
    for path, text in ((jsonl, "\n".join(lines) + "\n"), (md, transcript_markdown(record))):
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    return jsonl, md


def read_transcript(path: str | Path) -> dict[str, Any]:
    """Reads a transcript JSONL (``simulate``/``chat`` output, or plain ``{"role", "content"}`` lines)
    into ``{id, persona, agent, user, ..., turns}``.

    Raises:
        PersonagraphError: naming the file and line of the first problem.
    """
    path = Path(path)
    raw = read_text(path)
    header: dict[str, Any] = {}
    turns: list[dict[str, Any]] = []
    index = 0
    for number, item in read_jsonl(path, text=raw, objects=True):
        kind = item.get("type", "turn")
        if kind == "header":
            header = item
            continue
        if kind != "turn":
            continue
        role = {"human": "user", "ai": "assistant", "agent": "assistant"}.get(
            item.get("role"), item.get("role")
        )
        text = item.get("text", item.get("content"))
        if role not in ("user", "assistant") or not isinstance(text, str):
            raise PersonagraphError(f"{path}:{number}: a turn needs role user/assistant and a text")
        if "index" in item:
            index = int(item["index"])
        elif role == "user" or index == 0:
            index += 1
        turns.append(
            {
                "index": index,
                "role": role,
                "text": text,
                "status": item.get("status", "ok"),
                "error": item.get("error"),
                "level": item.get("level"),
                "stop": bool(item.get("stop")),
                "refusal_marker": item.get("refusal_marker"),
            }
        )
    if not turns:
        raise PersonagraphError(f"{path}: no turns found")
    return {
        "id": header.get("id") or f"{slug(path.stem, 24)}-{short_id(raw)[:8]}",
        "persona": header.get("persona") or "",
        "user_persona": header.get("user_persona") or "",
        "scenario": header.get("scenario") or "",
        "adversarial": bool(header.get("adversarial")),
        "max_turns": header.get("max_turns"),
        "agent": header.get("agent") or "",
        "user": header.get("user") or "",
        "turns": turns,
    }


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
        "failed_turns": verdict["failed_turns"],
        "stop_reason": record["stop_reason"],
        "mean_score": verdict["mean_score"],
        "task_means": verdict["task_means"],
        "drift_slope": verdict["drift_slope"],
        "consistency": verdict.get("consistency"),
        "n_contradictions": verdict.get("n_contradictions"),
        "break": record["break"],
    }


def build_summary(store: RunStore, session_ids: list[str] | None = None) -> dict[str, Any]:
    """Per-session and overall numbers from the store's ``session`` records (optionally some sessions).

    ``overall``: sessions, finished, agent_turns, failed_turns, mean_score and task_means (means of the
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
        "finished": len(finished),
        "agent_turns": sum(s["agent_turns"] for s in sessions),
        "failed_turns": sum(s["failed_turns"] for s in sessions),
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
    return {"kind": "simulate", "sessions": sessions, "overall": overall}


# --- running sessions ---------------------------------------------------------------------------------
def redact_url(url: str) -> str:
    """A connection URL without its password (safe for meta, logs and errors)."""
    parts = urlsplit(url)
    if parts.password:
        netloc = f"{parts.username or ''}:***@{parts.hostname or ''}" + (
            f":{parts.port}" if parts.port else ""
        )
        parts = parts._replace(netloc=netloc)
    return urlunsplit(parts._replace(query=""))


@asynccontextmanager
async def open_checkpointer(run_dir: Path, url: str | None = None) -> AsyncIterator[Any]:
    """The session checkpointer: SQLite in the run directory, or Postgres for ``postgresql://`` URLs."""
    if not url:
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        async with AsyncSqliteSaver.from_conn_string(str(run_dir / "checkpoints.sqlite")) as saver:
            yield saver
        return
    if not url.startswith(("postgresql://", "postgres://")):
        raise PersonagraphError(f"--checkpoint-url {redact_url(url)}: expected postgresql://…")
    try:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
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
    graph: Any, spec: SessionSpec, context: Any, *, judges: list[str]
) -> dict[str, Any] | None:
    """Runs (or resumes) one session on a compiled session graph; returns its ``session`` record."""
    thread = {"configurable": {"thread_id": spec.id}, "recursion_limit": 4 * spec.max_turns + 20}
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
            "agent": context.agent.name,
            "user": context.user.name,
            "judges": judges,
            "turns": [],
            "stop_reason": None,
            "result": None,
        }
        final = await graph.ainvoke(state, thread, context=context, durability="sync")
    return final.get("result")


def _record_meta(store: RunStore, config: SimulateConfig, checkpoint_url: str | None, source: str) -> None:
    store.set_meta("kind", "simulate")
    store.set_meta("source", source)
    store.set_meta("config", config.model_dump(mode="json"))
    store.set_meta(
        "checkpointer", redact_url(checkpoint_url) if checkpoint_url else "sqlite:checkpoints.sqlite"
    )
    store.set_meta("versions", {"personagraph": __version__})
    store.set_meta(
        "prompts",
        {name: load_prompt(name).version for name in PROMPTS}
        | {
            f"rubric:{key}": data_hash(f"judges/rubrics/{key}.yaml")
            for key in (*TURN_RUBRICS, SESSION_RUBRIC)
        }
        | {
            "user_personas": data_hash("prompts/user_personas.yaml"),
            "pool": data_hash("environments/pool.yaml"),
        },
    )


def _finish_summary(
    store: RunStore,
    ids: list[str],
    meter: Meter,
    started: float,
    run_dir: Path,
    judges: list[str],
    skipped: list[str],
) -> dict[str, Any]:
    summary = build_summary(store, ids)
    summary.update(
        judges=judges,
        skipped_judges=skipped,
        llm_calls=meter.total_calls,
        cache_hits=meter.total_cache_hits,
        wall_time_s=round(time.perf_counter() - started, 3),
        roles=meter.as_dict(),
        tokens=store.call_stats(),
        run_dir=str(run_dir),
    )
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False), encoding="utf-8")
    return summary


EventHook = Callable[[str, dict[str, Any]], None]


async def simulate(
    config: SimulateConfig,
    run_dir: str | Path,
    *,
    settings: ModelSettings | None = None,
    agent: Agent | None = None,
    user: User | None = None,
    checkpoint_url: str | None = None,
    on_event: EventHook | None = None,
) -> dict[str, Any]:
    """Runs (or resumes) ``config.sessions`` sessions concurrently; returns the summary also written to
    ``summary.json``.

    Args:
        config: what to simulate.
        run_dir: the run directory (created if needed; reused to resume).
        settings: endpoint settings shared by the roles (base URL, API key).
        agent: the agent under test (any ``Agent``); default from ``config.model``/``config.agent``.
        user: the user side (any ``User``); default a simulated user on ``config.user_model``/``user_agent``.
        checkpoint_url: ``postgresql://…`` to checkpoint in Postgres instead of the run directory.
        on_event: called with ``("user_turn" | "agent_turn" | "session_done", payload)`` as things finish.
    """
    from personagraph.agents.plugin import load_agent
    from personagraph.graphs.session import SessionContext, build_graph

    run_dir = Path(run_dir)
    settings = (settings or ModelSettings()).model_copy(update={"concurrency": config.concurrency})
    for spec in [
        *config.judges,
        *([config.model] if config.model and agent is None else []),
        *([config.user_model] if not config.user_agent and user is None else []),
    ]:
        parse_spec(spec)
    agent_name = agent.name if agent is not None else config.agent_name
    check_self_judging(config.judges, agent_name, config.allow_self_judging)
    plugin_agent = load_agent(config.agent) if agent is None and config.agent else None
    plugin_user = load_agent(config.user_agent) if user is None and config.user_agent else None
    store = RunStore(run_dir)
    meter = Meter()
    started = time.perf_counter()
    try:
        _record_meta(store, config, checkpoint_url, "simulate")
        store.set_meta(
            "sides", {"agent": agent_name, "user": user.name if user is not None else config.user_name}
        )

        def client(spec: str, role: str, **overrides: Any) -> ModelClient:
            return ModelClient.create(spec, role, store=store, meter=meter, settings=settings, **overrides)

        judges = [
            client(spec, "judge", temperature=0.0, max_tokens=config.max_judge_tokens)
            for spec in config.judges
        ]
        verdict_judges = [
            client(spec, "session_judge", temperature=0.0, max_tokens=config.max_verdict_tokens)
            for spec in config.judges
        ]
        if config.allow_self_judging:
            usable, skipped = judges, []
        else:
            usable, skipped = split_judges(judges, agent_name)
        verdict_judges = [j for j in verdict_judges if str(j.spec) in {str(u.spec) for u in usable}]
        specs = session_specs(config)
        gate = asyncio.Semaphore(config.concurrency)
        hook = on_event or (lambda kind, payload: None)

        def sides(spec: SessionSpec) -> Sides:
            the_agent = (
                agent
                or plugin_agent
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
                    await run_session(graph, spec, context, judges=[str(j.spec) for j in usable])

            results = await asyncio.gather(*(one(s) for s in specs), return_exceptions=True)
            for result in results:
                if isinstance(result, BaseException):
                    raise result
        return _finish_summary(
            store, [s.id for s in specs], meter, started, run_dir, [str(j.spec) for j in usable], skipped
        )
    finally:
        store.close()


async def judge_session(
    path: str | Path,
    run_dir: str | Path,
    *,
    judges: list[str] | None = None,
    persona: str | None = None,
    settings: ModelSettings | None = None,
    allow_self_judging: bool = False,
) -> dict[str, Any]:
    """Judges a saved transcript (``chat``/``simulate`` JSONL): per-turn scores and the session verdict,
    written as a ``session`` record, transcripts and ``summary.json`` in ``run_dir``."""
    transcript = read_transcript(path)
    persona = " ".join((persona or transcript["persona"]).split())
    if not persona:
        raise PersonagraphError(f"{path}: the transcript names no persona; pass --persona")
    judge_specs = list(dict.fromkeys(judges or [DEFAULT_JUDGE]))
    for spec in judge_specs:
        parse_spec(spec)
    check_self_judging(judge_specs, transcript["agent"], allow_self_judging)
    run_dir = Path(run_dir)
    store = RunStore(run_dir)
    meter = Meter()
    started = time.perf_counter()
    try:
        config = SimulateConfig(
            persona=persona,
            model=transcript["agent"] or None,
            judges=judge_specs,
            turns=max(1, max(e["index"] for e in transcript["turns"])),
            allow_self_judging=allow_self_judging,
        )
        _record_meta(store, config, None, "judge-session")
        store.set_meta("transcript", str(path))
        settings = settings or ModelSettings()
        clients = [
            ModelClient.create(
                s, "judge", store=store, meter=meter, settings=settings, temperature=0.0, max_tokens=200
            )
            for s in judge_specs
        ]
        usable, skipped = (clients, []) if allow_self_judging else split_judges(clients, transcript["agent"])
        turns = [dict(e) for e in transcript["turns"]]
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
        verdict_clients = [
            ModelClient.create(
                str(j.spec),
                "session_judge",
                store=store,
                meter=meter,
                settings=settings,
                temperature=0.0,
                max_tokens=600,
            )
            for j in usable
        ]
        verdict = await session_verdict(verdict_clients, persona, turns, skipped)
        values = {
            **transcript,
            "session_id": transcript["id"],
            "persona": persona,
            "turns": turns,
            "judges": [str(j.spec) for j in usable],
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
        return _finish_summary(
            store, [record["id"]], meter, started, run_dir, [str(j.spec) for j in usable], skipped
        )
    finally:
        store.close()


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
    from personagraph.graphs.session import SessionContext, build_graph

    persona = " ".join(persona.split())
    if not persona:
        raise PersonagraphError("--persona: empty")
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
    store = RunStore(run_dir)
    try:
        config = SimulateConfig(
            persona=persona,
            model=agent.name,
            user_model=user.name,
            judges=[str(j.spec) for j in usable],
            turns=max_turns,
        )
        _record_meta(store, config, None, "chat")
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
            record = await run_session(graph, spec, context, judges=[str(j.spec) for j in usable])
        return record or {}
    finally:
        store.close()
