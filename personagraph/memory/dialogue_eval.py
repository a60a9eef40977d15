"""MADial-Bench memory recognition + response, judged with MADial's criteria.

Settings (the candidates the responder chooses from, per dialogue):
1. the gold memory only; 2. the gold + 4 non-relevant, de-duplicated memories shuffled by the seed (hard
negatives from the retriever's ranking, as in the paper); 3. the retriever's top 5.

Every test turn runs the memory dialogue graph (recognize one memory or none → reply). A judge scores each
reply on five criteria (``judges/rubrics/madial_*.yaml``), each 0–3 as the sum of three 0/1 sub-points,
and picks the more intimate of the reply and MADial's human reference (positions shuffled by the seed):
the intimacy figure is the model's win rate against the reference. Everything lands in the run store as
it finishes; running again resumes.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field
from rich.table import Table

from personagraph.errors import PersonagraphError
from personagraph.judges.protocols import fence
from personagraph.memory.bank import Memory
from personagraph.memory.madial import (
    MadialDialogue,
    setting2_candidates,
    setting3_candidates,
    user_name,
    user_profile,
)
from personagraph.prompts import load_prompt
from personagraph.resources import data_hash, read_yaml

CRITERIA = ("naturalness", "style_coherence", "memory_injection", "emotional_support", "emotion_improvement")


class DialogueEvalConfig(BaseModel):
    """One ``memory eval-dialogue`` run."""

    setting: Literal[1, 2, 3]
    model: str
    judge: str
    seed: int = 1991
    limit: int | None = None
    method: str = "fusion"
    negatives: int = 4
    concurrency: int = Field(4, ge=1)
    retry_failed: bool = True  # a resumed run does the turns with failed items again (False keeps them)


class SubpointReply(BaseModel):
    """A judge's verdict on one criterion: each sub-point 0 or 1."""

    point_1: Literal[0, 1]
    point_2: Literal[0, 1]
    point_3: Literal[0, 1]
    rationale: str = ""


class PickReply(BaseModel):
    """A pick-the-best verdict: the number of the chosen candidate."""

    best: int


def load_criterion(key: str) -> dict[str, Any]:
    """A MADial rubric file (``judges/rubrics/madial_<key>.yaml``), checked."""
    path = f"judges/rubrics/madial_{key}.yaml"
    data = read_yaml(path)
    kind = data.get("kind") if isinstance(data, dict) else None
    if kind == "subpoints" and len(data.get("subpoints") or []) != 3:
        raise PersonagraphError(f"personagraph/{path}: a 0-3 criterion needs exactly three sub-points")
    if kind not in ("subpoints", "pick_best"):
        raise PersonagraphError(f"personagraph/{path}: kind must be subpoints or pick_best")
    return {**data, "hash": data_hash(path)}


def _gold_text(memory: Memory) -> str:
    return f"({memory.time}; {memory.emotion}) {memory.event}"


async def judge_criterion(
    client: Any, key: str, *, dialogue: str, response: str, gold: Memory, user_id: str
) -> dict[str, Any]:
    """Scores one reply on one criterion: ``{"score": 0..3 | None, "points": [...], "error": ...}``."""
    rubric = load_criterion(key)
    subpoints = "\n".join(f"{i + 1}. {text}" for i, text in enumerate(rubric["subpoints"]))
    messages = load_prompt("memory_judge").messages(
        criterion=rubric["task"],
        description=rubric["criterion"].strip(),
        subpoints=subpoints,
        guidance=rubric.get("guidance", "").strip(),
        user_name=user_name(user_id),
        user_profile=user_profile(user_id),
        gold_memory=_gold_text(gold),
        dialogue=fence("DIALOGUE", dialogue),
        response=fence("REPLY", response),
    )
    reply = await client.structured(messages, SubpointReply)
    if not reply.ok or reply.value is None:
        return {"score": None, "points": None, "error": reply.error or "no verdict"}
    points = [reply.value.point_1, reply.value.point_2, reply.value.point_3]
    return {"score": sum(points), "points": points, "rationale": reply.value.rationale, "error": None}


async def judge_intimacy(client: Any, *, dialogue: str, candidates: list[str], user_id: str) -> int | None:
    """Index (0-based) of the candidate reply the judge finds most intimate, or None on failure."""
    rubric = load_criterion("intimacy")
    listed = "\n".join(f"{i + 1}. {text}" for i, text in enumerate(candidates))
    messages = load_prompt("memory_intimacy").messages(
        description=f"{rubric['criterion'].strip()} {rubric.get('guidance', '').strip()}",
        user_name=user_name(user_id),
        user_profile=user_profile(user_id),
        dialogue=dialogue,
        candidates=listed,
    )
    reply = await client.structured(messages, PickReply)
    if not reply.ok or reply.value is None or not 1 <= reply.value.best <= len(candidates):
        return None
    return reply.value.best - 1


def setting_candidates(
    config: DialogueEvalConfig, d: MadialDialogue, ranked: list[str], pool: dict[str, Memory]
) -> list[Memory]:
    if config.setting == 1:
        return [pool[d.gold_id]]
    if config.setting == 2:
        return setting2_candidates(d, ranked, pool, seed=config.seed, negatives=config.negatives)
    return setting3_candidates(ranked, pool, 5)


def summarize(verdicts: list[dict[str, Any]], config: DialogueEvalConfig) -> dict[str, Any]:
    """Means of each criterion (0–3) over judged replies, recognition rates, intimacy win rate."""
    ok = [v for v in verdicts if v["status"] == "ok"]
    means: dict[str, float | None] = {}
    for c in CRITERIA:
        vals = [v["scores"][c]["score"] for v in ok if v["scores"].get(c, {}).get("score") is not None]
        means[c] = sum(vals) / len(vals) if vals else None
    wins = [v["intimacy_win"] for v in ok if v.get("intimacy_win") is not None]
    n = len(verdicts)
    return {
        "setting": config.setting,
        "model": config.model,
        "judge": config.judge,
        "turns": n,
        "failed_replies": n - len(ok),
        "criteria": means,
        "intimacy_win_rate": sum(wins) / len(wins) if wins else None,
        "chose_memory": sum(v["chose_memory"] for v in verdicts) / n if n else None,
        "recognized_gold": sum(v["recognized_gold"] for v in verdicts) / n if n else None,
        "recognized_relevant": sum(v["recognized_relevant"] for v in verdicts) / n if n else None,
    }


def render_summary(summary: dict[str, Any]) -> Table:
    """The summary as a table (criteria 0–3, rates 0–1)."""
    table = Table(
        title=f"MADial setting {summary['setting']}: {summary['model']} judged by {summary['judge']}",
        caption=f"{summary['turns']} test turns, {summary['failed_replies']} failed replies",
    )
    table.add_column("measure")
    table.add_column("value", justify="right")
    for c, value in summary["criteria"].items():
        table.add_row(f"{c} (0-3)", "—" if value is None else f"{value:.2f}")
    for key in ("intimacy_win_rate", "chose_memory", "recognized_gold", "recognized_relevant"):
        value = summary.get(key)
        table.add_row(key, "—" if value is None else f"{value:.3f}")
    return table
