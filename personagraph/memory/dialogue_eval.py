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

import asyncio
import random
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field
from rich.table import Table

from personagraph.errors import PersonagraphError
from personagraph.memory.bank import Memory, MemoryBank
from personagraph.memory.madial import (
    MadialDialogue,
    check_references,
    facts,
    load_dialogues,
    load_memories,
    setting2_candidates,
    setting3_candidates,
    user_name,
    user_profile,
)
from personagraph.memory.recall import Recaller, RecallSettings
from personagraph.prompts import load_prompt
from personagraph.resources import data_hash, read_yaml
from personagraph.runs.base import ProgressEvent, ProgressHandler

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
        dialogue=dialogue,
        response=response,
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


def _candidates(
    config: DialogueEvalConfig, d: MadialDialogue, ranked: list[str], pool: dict[str, Memory]
) -> list[Memory]:
    if config.setting == 1:
        return [pool[d.gold_id]]
    if config.setting == 2:
        return setting2_candidates(d, ranked, pool, seed=config.seed, negatives=config.negatives)
    return setting3_candidates(ranked, pool, 5)


async def run_dialogue_eval(
    config: DialogueEvalConfig,
    dialogues_path: str | Path,
    memories_path: str | Path,
    run_dir: str | Path,
    on_progress: ProgressHandler | None = None,
) -> dict[str, Any]:
    """Runs (or resumes) one setting and returns the summary (also stored as ``madial_summary``).

    ``on_progress`` hears ``embed memories`` (one step) and ``replies`` (one per test turn, judged).
    """
    from personagraph.graphs.memory_dialogue import (
        MemoryDialogueContext,
        render_dialogue,
        run_memory_dialogue,
    )
    from personagraph.memory.context import context_from_lines
    from personagraph.models import ModelClient
    from personagraph.store import RunStore

    dialogues = load_dialogues(dialogues_path)
    memories = load_memories(memories_path)
    check_references(dialogues, memories, str(dialogues_path))
    if config.limit:
        dialogues = dialogues[: config.limit]
    store = RunStore(run_dir)
    store.set_meta("madial_dialogue_config", config.model_dump())
    store.set_meta("madial_rubrics", {k: load_criterion(k)["hash"] for k in (*CRITERIA, "intimacy")})
    pools: dict[str, dict[str, Memory]] = {}
    for m in memories:
        pools.setdefault(m.user_id, {})[m.id] = m

    emit = on_progress or (lambda event: None)
    emit(ProgressEvent("embed memories", 0, 1))
    bank = await asyncio.to_thread(MemoryBank, Path(run_dir) / "memory")
    await asyncio.to_thread(bank.upsert, memories)
    emit(ProgressEvent("embed memories", 1, 1))
    total = sum(len(d.test_turns) for d in dialogues)
    finished = 0
    emit(ProgressEvent("replies", 0, total))
    recaller = Recaller(bank, RecallSettings(method=config.method))  # type: ignore[arg-type]
    responder = ModelClient.create(
        config.model, "memory_responder", store=store, temperature=0.7, max_tokens=256
    )
    judge = ModelClient.create(config.judge, "memory_judge", store=store, temperature=0.0, max_tokens=300)
    context = MemoryDialogueContext(responder=responder, bank=bank)
    date = facts().get("conversation_date", "")
    gate = asyncio.Semaphore(config.concurrency)

    async def one(d: MadialDialogue, turn: int, ranked: list[str]) -> None:
        nonlocal finished
        await reply(d, turn, ranked)
        finished += 1
        emit(ProgressEvent("replies", finished, total))

    async def reply(d: MadialDialogue, turn: int, ranked: list[str]) -> None:
        key = f"s{config.setting}:{d.index}:{turn}"
        if store.get("madial_verdict", key) is not None:
            return
        async with gate:
            cands = _candidates(config, d, ranked, pools[d.user_id])
            state = {
                "user_id": d.user_id,
                "user_name": user_name(d.user_id),
                "user_profile": user_profile(d.user_id),
                "persona": "",
                "date": date,
                "lines": d.lines[:turn],
                "candidates": [m.model_dump() for m in cands],
            }
            final = await run_memory_dialogue(state, context)  # type: ignore[arg-type]
            chosen = (final.get("chosen") or {}).get("id")
            response = {
                "key": key,
                "dialogue": d.index,
                "turn": turn,
                "user_id": d.user_id,
                "candidate_ids": [m.id for m in cands],
                "chosen_id": chosen,
                "reply": final.get("reply", ""),
                "status": final.get("status"),
                "error": final.get("error"),
                "reference": d.reference(turn),
            }
            store.put("madial_response", key, response, unit=str(d.index))
            verdict: dict[str, Any] = {
                "key": key,
                "status": response["status"],
                "scores": {},
                "intimacy_win": None,
            }
            if response["status"] == "ok":
                text = render_dialogue(context_from_lines(d.lines[:turn]), user_name=user_name(d.user_id))
                gold = pools[d.user_id][d.gold_id]
                results = await asyncio.gather(
                    *(
                        judge_criterion(
                            judge, c, dialogue=text, response=response["reply"], gold=gold, user_id=d.user_id
                        )
                        for c in CRITERIA
                    )
                )
                verdict["scores"] = dict(zip(CRITERIA, results, strict=True))
                order = [response["reply"], response["reference"]]
                flip = random.Random(f"{config.seed}:{key}").random() < 0.5
                shown = order[::-1] if flip else order
                pick = await judge_intimacy(judge, dialogue=text, candidates=shown, user_id=d.user_id)
                if pick is not None:
                    verdict["intimacy_win"] = (pick == 1) if flip else (pick == 0)
            verdict["recognized_gold"] = chosen == d.gold_id
            verdict["recognized_relevant"] = chosen in set(d.relevant_ids)
            verdict["chose_memory"] = chosen is not None
            store.put("madial_verdict", key, verdict, unit=str(d.index))

    jobs = []
    for d in dialogues:
        ranked: list[str] = []
        if config.setting in (2, 3):
            found = await recaller.recall(d.user_id, d.context(), 20)
            ranked = [r.memory.id for r in found]
        jobs += [one(d, turn, ranked) for turn in d.test_turns]
    await asyncio.gather(*jobs)

    keys = {f"s{config.setting}:{d.index}:{t}" for d in dialogues for t in d.test_turns}
    verdicts = [v for v in store.records("madial_verdict") if v["key"] in keys]
    summary = summarize(verdicts, config)
    store.put("madial_summary", f"s{config.setting}", summary)
    return summary


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
