"""The ``memory eval-dialogue`` run (MADial-Bench): for each test turn, the memory dialogue graph
recognizes one memory (or none) and replies; a judge scores the reply on MADial's criteria and picks the
more intimate of the reply and the reference. ``memory/dialogue_eval.py`` holds the settings' candidates,
the judge calls and the statistics.

Items: each test turn's ``madial_verdict`` record. Its failed items — a failed recognition call, a failed
reply, a criterion the judge gave no score, no intimacy pick — make the turn be done again on resume (its
successful calls come from the response cache) unless ``retry_failed`` is off.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

from personagraph.graphs.memory_dialogue import MemoryDialogueContext, render_dialogue, run_memory_dialogue
from personagraph.memory.bank import Memory, MemoryBank
from personagraph.memory.context import context_from_lines
from personagraph.memory.dialogue_eval import (
    CRITERIA,
    DialogueEvalConfig,
    judge_criterion,
    judge_intimacy,
    load_criterion,
    setting_candidates,
    summarize,
)
from personagraph.memory.madial import (
    MadialDialogue,
    check_references,
    facts,
    load_dialogues,
    load_memories,
    user_name,
    user_profile,
)
from personagraph.memory.recall import Recaller, RecallSettings
from personagraph.models import ModelClient
from personagraph.records import MadialResponse, MadialSummary, MadialVerdict, register_record_type
from personagraph.runs.base import FailedItem, ProgressHandler, Run, Summary, synchronous

KIND = "memory-dialogue"
RESPONSE_KIND = "madial_response"  # record kinds: a test turn's reply, its verdict, a setting's summary
VERDICT_KIND = "madial_verdict"
SUMMARY_KIND = "madial_summary"
register_record_type(RESPONSE_KIND, MadialResponse)
register_record_type(VERDICT_KIND, MadialVerdict)
register_record_type(SUMMARY_KIND, MadialSummary)


class MemoryDialogueSummary(Summary):
    """One setting's numbers (the keys of :func:`~personagraph.memory.dialogue_eval.summarize`)."""


async def run(
    config: DialogueEvalConfig,
    dialogues_path: str | Path,
    memories_path: str | Path,
    run_dir: str | Path,
    *,
    on_progress: ProgressHandler | None = None,
) -> MemoryDialogueSummary:
    """Runs (or resumes) one setting and returns the summary (also stored as ``madial_summary``).

    ``on_progress`` hears ``embed memories`` (one step) and ``replies`` (one per test turn, judged).
    """

    dialogues = load_dialogues(dialogues_path)
    memories = load_memories(memories_path)
    check_references(dialogues, memories, str(dialogues_path))
    if config.limit:
        dialogues = dialogues[: config.limit]
    with Run(KIND, run_dir, config, config_key="madial_dialogue_config", on_progress=on_progress,
             retry_failed=config.retry_failed) as the_run:
        the_run.record(madial_rubrics={k: load_criterion(k)["hash"] for k in (*CRITERIA, "intimacy")})
        return await _run(config, dialogues, memories, the_run)


async def _run(
    config: DialogueEvalConfig, dialogues: list[MadialDialogue], memories: list[Memory], the_run: Run
) -> MemoryDialogueSummary:
    store, run_dir = the_run.store, the_run.run_dir
    pools: dict[str, dict[str, Memory]] = {}
    for m in memories:
        pools.setdefault(m.user_id, {})[m.id] = m

    the_run.expect("embed memories", 1)
    bank = await asyncio.to_thread(MemoryBank, Path(run_dir) / "memory")
    await asyncio.to_thread(bank.upsert, memories)
    the_run.advance("embed memories")
    the_run.expect("replies", sum(len(d.test_turns) for d in dialogues))
    recaller = Recaller(bank, RecallSettings(method=config.method))  # type: ignore[arg-type]
    responder = ModelClient.create(
        config.model, "memory_responder", store=store, meter=the_run.meter, temperature=0.7, max_tokens=256
    )
    judge = ModelClient.create(
        config.judge, "memory_judge", store=store, meter=the_run.meter, temperature=0.0, max_tokens=300
    )
    context = MemoryDialogueContext(responder=responder, bank=bank)
    date = facts().get("conversation_date", "")
    gate = asyncio.Semaphore(config.concurrency)

    async def one(d: MadialDialogue, turn: int, ranked: list[str]) -> None:
        await reply(d, turn, ranked)
        the_run.advance("replies")

    async def reply(d: MadialDialogue, turn: int, ranked: list[str]) -> None:
        key = f"s{config.setting}:{d.index}:{turn}"
        stored = store.get(VERDICT_KIND, key)
        if stored is not None and not the_run.pending(_failures(stored, config)):
            return
        async with gate:
            cands = setting_candidates(config, d, ranked, pools[d.user_id])
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
            store.put(RESPONSE_KIND, key, response, unit=str(d.index))
            verdict: dict[str, Any] = {
                "key": key,
                "status": response["status"],
                "error": response["error"],
                "recognition_error": final.get("recognition_error"),
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
            store.put(VERDICT_KIND, key, verdict, unit=str(d.index))

    jobs = []
    for d in dialogues:
        ranked: list[str] = []
        if config.setting in (2, 3):
            found = await recaller.recall(d.user_id, d.context(), 20)
            ranked = [r.memory.id for r in found]
        jobs += [one(d, turn, ranked) for turn in d.test_turns]
    await asyncio.gather(*jobs)

    keys = {f"s{config.setting}:{d.index}:{t}" for d in dialogues for t in d.test_turns}
    verdicts = [v for v in store.records(VERDICT_KIND) if v["key"] in keys]
    summary = summarize(verdicts, config)
    store.put(SUMMARY_KIND, f"s{config.setting}", summary)
    failures = [f for v in verdicts for f in _failures(v, config)]
    incomplete = len(keys) - len(verdicts)
    return the_run.finish(MemoryDialogueSummary(**summary, failures=failures, incomplete=incomplete))


run_sync = synchronous(run)


def _failures(verdict: dict[str, Any], config: DialogueEvalConfig) -> list[FailedItem]:
    """A test turn's failed items: its recognition call, its reply, else the criteria the judge gave no score
    and a missing intimacy pick."""
    key, responder = verdict["key"], config.model
    failed = []
    if verdict.get("recognition_error"):
        reason = verdict["recognition_error"]
        failed.append(FailedItem(stage="recognition", item=key, model=responder, reason=reason))
    if verdict["status"] != "ok":
        return [*failed, FailedItem(stage="replies", item=key, model=responder, reason=verdict.get("error"))]
    failed += [
        FailedItem(stage="criteria", item=f"{key}/{name}", model=config.judge, reason=score.get("error"))
        for name, score in verdict["scores"].items()
        if score.get("score") is None
    ]
    if verdict.get("intimacy_win") is None:
        failed.append(FailedItem(stage="intimacy", item=key, model=config.judge, reason="no valid pick"))
    return failed
