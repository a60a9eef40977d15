"""Judging a multi-turn session: every agent turn on the turn rubrics, and the session verdict
(contradictions, drift of per-turn scores, persona breaks), for ``simulate``, ``chat`` and ``judge-session``.

The same rubrics and judge call as ``eval`` (:func:`~personagraph.judges.judge.score_response`); a failed
verdict is kept with its error, never a score. :func:`session_record` builds the ``session`` record the
session graph writes (shape: ``runs/simulate.py``'s module docstring).
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from personagraph.errors import PersonagraphError
from personagraph.judges.judge import cap_persona_break, score_response
from personagraph.judges.protocols import fence
from personagraph.judges.refusal import detect_refusal
from personagraph.judges.rubrics import load_rubric
from personagraph.models import ModelClient
from personagraph.prompts import load_prompt
from personagraph.schemas import capped_text

TURN_RUBRICS = ("persona_consistency", "linguistic_habits")
SESSION_RUBRIC = "session_consistency"


def split_judges(judges: list[ModelClient], agent_name: str) -> tuple[list[ModelClient], list[str]]:
    """Judges that may score ``agent_name``'s turns, and the specs skipped because they are its model."""
    usable = [j for j in judges if j.name != agent_name]
    skipped = [j.name for j in judges if j.name == agent_name]
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
    ``eval``, persona-break caps included). Returns ``(scores, rationales)``: ``{judge: {task: score or
    None}}`` and the rationales (a failed verdict is ``None`` with its error as rationale, never a score)."""
    rubrics = [load_rubric(key) for key in TURN_RUBRICS]
    jobs = [(judge, rubric) for judge in judges for rubric in rubrics]
    results = await asyncio.gather(
        *(
            score_response(judge, rubric, persona=persona, question=question, response=response)
            for judge, rubric in jobs
        )
    )
    marker = detect_refusal(response)
    results = [cap_persona_break(scored, rubric, marker)
               for (_, rubric), scored in zip(jobs, results, strict=True)]
    scores: dict[str, dict[str, int | None]] = {}
    rationales: dict[str, dict[str, str]] = {}
    for (judge, rubric), scored in zip(jobs, results, strict=True):
        name = judge.name
        scores.setdefault(name, {})[rubric.task] = scored.score if scored.status == "ok" else None
        capped = f" (capped from {scored.judge_score}: {scored.capped_by})" if scored.capped_by else ""
        rationales.setdefault(name, {})[rubric.task] = (
            scored.rationale + capped if scored.status == "ok" else f"(verdict failed: {scored.error})"
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
        persona=fence("PERSONA", persona),
        transcript=fence("CONVERSATION", transcript_for_judge(turns)),
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
        "turns_at_token_limit": sum(e["status"] == "ok" and e.get("at_token_limit") is True for e in agent),
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
        by_judge = {j.name: r for j, r in zip(judges, results, strict=True)}
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
        "min_turns": values.get("min_turns", 1),
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
