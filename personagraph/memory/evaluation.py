"""Retrieval evaluation on MADial-style files: rank every dialogue's memories, score, save the rankings."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from pydantic import BaseModel

from personagraph.embeddings import encode
from personagraph.memory.bank import Memory, MemoryBank
from personagraph.memory.madial import MadialDialogue, check_references
from personagraph.memory.metrics import RetrievalScores, evaluate_rankings
from personagraph.memory.recall import Recaller, RecallSettings, fuse
from personagraph.runs.base import ProgressEvent, ProgressHandler


class QueryRanking(BaseModel):
    """One query's ranking, as written by ``--save-rankings`` (ids best first, top 10)."""

    query_index: int
    user_id: str
    relevant_ids: list[str]
    ranked_ids: list[str]


class RetrievalRun(BaseModel):
    """Scores of each method and the rankings behind them."""

    scores: dict[str, RetrievalScores]
    rankings: dict[str, list[QueryRanking]]


def warm_queries(dialogues: Sequence[MadialDialogue], model_path: str | None = None) -> None:
    """Embeds every query text of the dialogues in one batch (the encoder cache serves the recalls)."""
    texts: list[str] = []
    for d in dialogues:
        ctx = d.context()
        texts += list(ctx.views().values()) + ctx.user_turns() + ctx.texts()
    encode(texts, model_path=model_path)


def evaluate_retrieval(
    dialogues: Sequence[MadialDialogue],
    memories: Sequence[Memory],
    methods: Sequence[str],
    *,
    ks: Sequence[int] = (1, 3, 5, 10),
    memory_dir: str | Path | None = None,
    settings: RecallSettings | None = None,
    source: str = "dialogues",
    on_progress: ProgressHandler | None = None,
) -> RetrievalRun:
    """Builds a bank of ``memories`` (in ``memory_dir`` or a temp folder) and scores each method.

    Every method ranks the same candidates (computed once per dialogue); rankings keep the top
    ``max(ks, 10)`` ids. ``on_progress`` hears each stage: ``embed memories`` and ``embed queries`` (one
    step each, the slow part on CPU), ``candidates`` (per dialogue), ``methods``.
    """
    check_references(dialogues, memories, source)
    depth = max(max(ks), 10)
    base = settings or RecallSettings()
    emit = on_progress or (lambda event: None)
    with tempfile.TemporaryDirectory(prefix="personagraph-memory-") as tmp:
        bank = MemoryBank(memory_dir or tmp)
        emit(ProgressEvent("embed memories", 0, 1))
        bank.upsert(list(memories))
        emit(ProgressEvent("embed memories", 1, 1))
        emit(ProgressEvent("embed queries", 0, 1))
        warm_queries(dialogues, bank.model_path)
        emit(ProgressEvent("embed queries", 1, 1))
        recaller = Recaller(bank, base)
        cands = []
        for d in dialogues:
            cands.append(recaller.candidates(d.user_id, d.context()))
            emit(ProgressEvent("candidates", len(cands), len(dialogues)))
        scores: dict[str, RetrievalScores] = {}
        rankings: dict[str, list[QueryRanking]] = {}
        for method in methods:
            chosen = base.model_copy(update={"method": method})
            rows = []
            for d, c in zip(dialogues, cands, strict=True):
                if not c.memories:
                    rows.append(
                        QueryRanking(
                            query_index=d.index, user_id=d.user_id, relevant_ids=d.relevant_ids, ranked_ids=[]
                        )
                    )
                    continue
                order = np.argsort(-fuse(c, chosen), kind="stable")[:depth]
                rows.append(
                    QueryRanking(
                        query_index=d.index,
                        user_id=d.user_id,
                        relevant_ids=d.relevant_ids,
                        ranked_ids=[c.memories[i].id for i in order],
                    )
                )
            rankings[method] = rows
            scores[method] = evaluate_rankings([(r.relevant_ids, r.ranked_ids) for r in rows], ks)
            emit(ProgressEvent("methods", len(scores), len(methods)))
    return RetrievalRun(scores=scores, rankings=rankings)


def write_rankings(path: str | Path, rows: Sequence[QueryRanking], top: int = 10) -> None:
    """One JSON line per query: ``query_index``, ``user_id``, ``relevant_ids``, ``ranked_ids`` (top 10)."""
    with Path(path).open("w", encoding="utf-8") as handle:
        for row in rows:
            data = row.model_dump()
            data["ranked_ids"] = data["ranked_ids"][:top]
            handle.write(json.dumps(data, ensure_ascii=False) + "\n")
