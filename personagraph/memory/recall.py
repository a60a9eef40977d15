"""Recall: which of a user's memories fit the conversation so far.

Signals ("components"), each a score per candidate memory:

- ``dense.<view>``: cosine between the memory's embedding and one view of the context — ``prefix`` (the
  whole text), ``user`` (the user's turns), ``last_user``, ``all`` (every turn's text), ``turns_lse``
  (a soft maximum over the user's turns embedded one by one) and ``turns_max`` (maximum over all turns);
- ``bm25``: Okapi BM25 of the user's turns against the memory text (stemmed, stop words removed);
- ``emotion``: proactive cue — how well the user's turns match the memory's emotion (prototype sentences,
  :mod:`personagraph.memory.emotion`), or a 0/1 match with an emotion given by the caller;
- ``scene``: 0/1 match of the memory's scene with a detected or given scene.

Methods:

- ``dense``: one dense view (``view``, default ``prefix``) — passive recall;
- ``bm25``: lexical only;
- ``hybrid``: dense (prefix) and BM25 fused by reciprocal rank;
- ``proactive``: dense (prefix) plus the detected emotion (and scene, when given), as a boost or a filter;
- ``multiview``: the dense views of ``fusion_views`` (default: all six), z-normalized over the candidates
  and averaged;
- ``fusion`` (default): multiview + ``bm25_weight``·z(bm25) +
  ``emotion_weight``·z(emotion).

Candidates come from Chroma (the top ``candidates`` of each whole-text view, united); when the user has
no more memories than that, every memory is a candidate and scoring is exact. An optional LLM reranker
reorders the top ``rerank_top`` of any method.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import BaseModel, Field

from personagraph.embeddings import encode
from personagraph.memory.context import DialogueContext
from personagraph.memory.emotion import detect_emotion, detect_scene, emotion_affinity, emotion_class
from personagraph.memory.memories import Memory
from personagraph.memory.rerank import rerank

if TYPE_CHECKING:
    from personagraph.memory.bank import MemoryBank
    from personagraph.models import ModelClient

Method = Literal["dense", "bm25", "hybrid", "proactive", "multiview", "fusion"]
View = Literal["prefix", "user", "last_user", "all", "turns_lse", "turns_max"]
METHODS: tuple[str, ...] = ("dense", "bm25", "hybrid", "proactive", "multiview", "fusion")
VIEWS: tuple[str, ...] = ("prefix", "user", "last_user", "all", "turns_lse", "turns_max")
_WHOLE_VIEWS = ("prefix", "user", "last_user", "all")


class RecallSettings(BaseModel):
    """How to recall.

    The defaults (weights, temperature, the six views) were developed looking at all 160 MADial-Bench
    queries, so MADial scores with them are in-sample; ``bench/madial_retrieval.py`` reports the held-out
    figure, every setting chosen on one user's dialogues and scored on the other's.
    """

    method: Method = "fusion"
    view: View = Field("prefix", description="the dense view of method 'dense'")
    fusion_views: tuple[View, ...] = Field(VIEWS, min_length=1, description="dense views multiview averages")
    candidates: int = Field(100, ge=1, description="memories fetched from Chroma per query view")
    bm25_weight: float = 0.15
    emotion_weight: float = 0.1
    lse_temperature: float = 0.1
    rrf_k: int = 60
    proactive: Literal["boost", "filter"] = "boost"
    proactive_weight: float = 0.5
    rerank_top: int = Field(0, ge=0, description="LLM-rerank this many top candidates (0: off)")


class Recalled(BaseModel):
    """A recalled memory, its final score and the components that made it."""

    memory: Memory
    score: float
    components: dict[str, float] = Field(default_factory=dict)


@dataclass
class Candidates:
    """Candidate memories of one query with every computed component (arrays aligned with ``memories``)."""

    memories: list[Memory]
    embeddings: np.ndarray
    components: dict[str, np.ndarray] = field(default_factory=dict)
    emotion: str | None = None
    scene: str | None = None


# --- lexical ------------------------------------------------------------------------------------------
_STOP = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "if",
        "of",
        "to",
        "in",
        "on",
        "at",
        "for",
        "with",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "am",
        "i",
        "you",
        "he",
        "she",
        "it",
        "we",
        "they",
        "me",
        "my",
        "your",
        "his",
        "her",
        "its",
        "our",
        "their",
        "this",
        "that",
        "these",
        "those",
        "so",
        "too",
        "very",
        "just",
        "really",
        "do",
        "did",
        "does",
        "have",
        "has",
        "had",
        "not",
        "no",
        "yes",
        "oh",
        "wow",
        "hey",
        "what",
        "how",
        "why",
        "when",
        "where",
        "who",
        "which",
        "can",
        "could",
        "would",
        "should",
        "will",
        "shall",
        "may",
        "might",
        "must",
        "about",
        "as",
        "by",
        "from",
        "up",
        "down",
        "out",
        "over",
        "then",
        "than",
        "there",
        "here",
        "also",
        "all",
        "any",
        "some",
        "more",
        "most",
        "much",
        "many",
        "one",
        "two",
        "im",
        "it's",
        "i'm",
        "you're",
        "that's",
        "don't",
    ]
)
_WORD = re.compile(r"[a-z0-9]+")


@lru_cache(maxsize=1)
def _stemmer() -> Any:
    from nltk.stem import PorterStemmer  # only for BM25 recall

    return PorterStemmer()


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    return _stemmer().stem(word)


def tokenize(text: str) -> list[str]:
    """BM25 tokens: lower-cased words, possessive 's dropped, stop words removed, Porter-stemmed."""
    text = text.lower().replace("\u2019", "'").replace("'s ", " ")
    return [_stem(w) for w in _WORD.findall(text) if w not in _STOP]


def bm25_scores(query: str, documents: list[str]) -> np.ndarray:
    """Okapi BM25 (rank-bm25 defaults) of one query against documents; the documents are the corpus."""
    from rank_bm25 import BM25Okapi  # only for BM25 recall

    if not documents:
        return np.zeros(0)
    corpus = [tokenize(d) or ["\x00"] for d in documents]
    return np.asarray(BM25Okapi(corpus).get_scores(tokenize(query)), dtype=np.float64)


# --- fusion helpers -------------------------------------------------------------------------------------
def zscore(values: np.ndarray) -> np.ndarray:
    """Standardizes scores over the candidates (all zeros when they are constant)."""
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        return values
    std = values.std()
    return (values - values.mean()) / std if std > 1e-12 else np.zeros_like(values)


def ranks(values: np.ndarray) -> np.ndarray:
    """0-based rank of each item by descending score (ties keep candidate order)."""
    order = np.argsort(-np.asarray(values, dtype=np.float64), kind="stable")
    out = np.empty(len(order), dtype=np.int64)
    out[order] = np.arange(len(order))
    return out


def rrf(arrays: list[np.ndarray], k: int = 60) -> np.ndarray:
    """Reciprocal rank fusion: sum of 1/(k + rank) over the rankings (rank 1 first)."""
    return sum((1.0 / (k + 1 + ranks(a)) for a in arrays), np.zeros(len(arrays[0])))


def dense_views(method: str, view: str) -> tuple[str, ...]:
    """The dense views a method needs."""
    if method in ("multiview", "fusion"):
        return VIEWS
    if method == "dense":
        return (view,)
    if method in ("hybrid", "proactive"):
        return ("prefix",)
    return ()


def fuse(cands: Candidates, settings: RecallSettings) -> np.ndarray:
    """The final score of every candidate under ``settings.method``."""
    comp = cands.components
    method = settings.method
    if method == "dense":
        return comp[f"dense.{settings.view}"]
    if method == "bm25":
        # ties (no shared word) are broken by the prefix view when it was computed
        tie = comp.get("dense.prefix")
        return comp["bm25"] + (1e-6 * tie if tie is not None else 0.0)
    if method == "hybrid":
        return rrf([comp["dense.prefix"], comp["bm25"]], settings.rrf_k)
    if method == "proactive":
        cue = comp.get("emotion_match", np.zeros(len(cands.memories))) + comp.get(
            "scene", np.zeros(len(cands.memories))
        )
        base = zscore(comp["dense.prefix"])
        if settings.proactive == "filter":
            return base + 1000.0 * cue
        return base + settings.proactive_weight * cue
    views = settings.fusion_views
    multiview = sum((zscore(comp[f"dense.{v}"]) for v in views), np.zeros(len(cands.memories))) / len(views)
    if method == "multiview":
        return multiview
    return (
        multiview
        + settings.bm25_weight * zscore(comp["bm25"])
        + settings.emotion_weight * zscore(comp["emotion"])
    )


# --- the recaller ------------------------------------------------------------------------------------------
class Recaller:
    """Recalls a user's memories for a dialogue context from a :class:`MemoryBank`.

    Args:
        bank: the memory bank.
        settings: method and weights (default: ``fusion``).
        reranker: a ModelClient used when ``settings.rerank_top > 0``.
    """

    def __init__(
        self,
        bank: MemoryBank,
        settings: RecallSettings | None = None,
        *,
        reranker: ModelClient | None = None,
    ) -> None:
        self.bank = bank
        self.settings = settings or RecallSettings()
        self.reranker = reranker

    def candidates(
        self,
        user_id: str,
        context: DialogueContext,
        *,
        emotion: str | None = None,
        scene: str | None = None,
        needed: set[str] | None = None,
    ) -> Candidates:
        """Fetches candidates and computes the components a method needs (``needed`` None: all of them).

        ``emotion``/``scene`` given by the caller (e.g. an LLM's detection) replace the offline detection.
        """
        s = self.settings
        needed = (
            set(needed)
            if needed is not None
            else {"bm25", "emotion", "scene", *(f"dense.{v}" for v in VIEWS)}
        )
        views = context.views()
        user_turns = context.user_turns() or [views["last_user"]]
        all_turns = context.texts() or [views["all"]]
        texts = [views[v] for v in _WHOLE_VIEWS] + user_turns + all_turns
        vectors = encode(texts, model_path=self.bank.model_path)
        whole = vectors[: len(_WHOLE_VIEWS)]
        user_vecs = vectors[len(_WHOLE_VIEWS) : len(_WHOLE_VIEWS) + len(user_turns)]
        all_vecs = vectors[len(_WHOLE_VIEWS) + len(user_turns) :]

        if s.method == "bm25":
            hits = self.bank.list(user_id, with_embeddings=True)  # lexical recall needs the whole pool
        else:
            found: dict[str, Any] = {}
            for row in self.bank.query(user_id, whole, s.candidates):
                for hit in row:
                    found.setdefault(hit.memory.id, hit)
            hits = list(found.values())
            hits.sort(key=lambda h: (h.memory.time, h.memory.id))
        memories = [h.memory for h in hits]
        dim = whole.shape[1]
        mem_vecs = np.stack([h.embedding for h in hits]) if hits else np.zeros((0, dim), dtype=np.float32)
        cands = Candidates(memories=memories, embeddings=mem_vecs)
        comp = cands.components
        for i, v in enumerate(_WHOLE_VIEWS):
            if f"dense.{v}" in needed:
                comp[f"dense.{v}"] = mem_vecs @ whole[i]
        if "dense.turns_lse" in needed:
            sims = mem_vecs @ user_vecs.T / s.lse_temperature
            top = sims.max(axis=1, keepdims=True) if len(memories) else 0.0
            comp["dense.turns_lse"] = s.lse_temperature * (
                np.log(np.exp(sims - top).sum(axis=1)) + np.ravel(top)
            )
        if "dense.turns_max" in needed:
            comp["dense.turns_max"] = (mem_vecs @ all_vecs.T).max(axis=1) if len(memories) else np.zeros(0)
        if "bm25" in needed:
            comp["bm25"] = bm25_scores(views["user"], [m.event for m in memories])
        if "emotion" in needed:
            if emotion:
                cands.emotion = emotion_class(emotion)
                comp["emotion"] = np.array(
                    [float(emotion_class(m.emotion) == cands.emotion) for m in memories]
                )
            else:
                cands.emotion = detect_emotion(user_vecs, self.bank.model_path)[0]
                comp["emotion"] = emotion_affinity(
                    user_vecs, [m.emotion for m in memories], self.bank.model_path
                )
            comp["emotion_match"] = np.array(
                [float(emotion_class(m.emotion) == cands.emotion) for m in memories]
            )
        if "scene" in needed:
            if scene:
                cands.scene = scene
                comp["scene"] = np.array([float(m.scene.lower() == scene.lower()) for m in memories])
            else:
                cands.scene = detect_scene(user_vecs, self.bank.model_path)[0]
        return cands

    def needed(self) -> set[str]:
        """Components the configured method reads."""
        s = self.settings
        out = {f"dense.{v}" for v in dense_views(s.method, s.view)}
        if s.method in ("bm25", "hybrid", "fusion"):
            out.add("bm25")
        if s.method in ("fusion", "proactive"):
            out.add("emotion")
        if s.method == "bm25":
            out.add("dense.prefix")
        return out

    def rank(
        self,
        user_id: str,
        context: DialogueContext,
        k: int = 10,
        *,
        emotion: str | None = None,
        scene: str | None = None,
    ) -> list[Recalled]:
        """Synchronous recall without reranking: the top ``k`` memories, best first."""
        needed = self.needed()
        if scene:
            needed.add("scene")
        cands = self.candidates(user_id, context, emotion=emotion, scene=scene, needed=needed)
        if not cands.memories:
            return []
        scores = fuse(cands, self.settings)
        order = np.argsort(-scores, kind="stable")[:k]
        return [
            Recalled(
                memory=cands.memories[i],
                score=float(scores[i]),
                components={name: float(arr[i]) for name, arr in cands.components.items()},
            )
            for i in order
        ]

    async def recall(
        self,
        user_id: str,
        context: DialogueContext,
        k: int = 10,
        *,
        emotion: str | None = None,
        scene: str | None = None,
    ) -> list[Recalled]:
        """The top ``k`` memories of ``user_id`` for ``context``, best first (LLM-reranked if configured)."""
        depth = max(k, self.settings.rerank_top)
        found = await asyncio.to_thread(self.rank, user_id, context, depth, emotion=emotion, scene=scene)
        if self.settings.rerank_top and self.reranker is not None and len(found) > 1:
            found = await rerank(self.reranker, context, found, self.settings.rerank_top)
        return found[:k]
