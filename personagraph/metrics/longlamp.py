"""Profile retrieval for personalized long-form writing (LongLaMP).

Given a user's profile (their past documents) and an input, retrieve k profile items — BM25 (rank-bm25),
dense (sentence embeddings, the packaged MiniLM by default), most recent, or random — put them in the
prompt, generate, and score ROUGE-1, ROUGE-L and METEOR against the target. An empty generation is a
failure: counted in the failure ratio and kept out of the means unless asked. Data: JSONL records
``{"input", "output", "profile": [{...}, ...]}`` (an optional ``id``).
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from personagraph.embeddings import embed
from personagraph.errors import PersonagraphError
from personagraph.files import read_jsonl
from personagraph.prompts import load_prompt
from personagraph.schemas import Seed

KIND = "longlamp"
RetrieverName = Literal["bm25", "dense", "recency", "random"]
RETRIEVERS: tuple[RetrieverName, ...] = ("bm25", "dense", "recency", "random")
TEXT_KEYS = ("title", "summary", "text", "abstract", "content", "reviewText", "review", "description")
"""Profile fields that hold text, in the order they are shown (LaMP/LongLaMP's field names)."""
DATE_KEYS = ("date", "time", "timestamp", "unixReviewTime", "reviewTime", "year", "created")
KEPT_METRICS = ("rouge1", "rougeL", "meteor")


class LongLaMPRecord(BaseModel):
    """One LongLaMP item: the task input, the target text and the user's profile."""

    id: str
    input: str
    output: str
    profile: list[dict[str, Any]]


def load_longlamp(path: str | Path, limit: int | None = None) -> list[LongLaMPRecord]:
    """Reads LongLaMP-style JSONL.

    Raises:
        PersonagraphError: missing/empty file, a missing field, an empty input/output, a profile that is not
            a non-empty list of objects with some text (file and line named).
    """
    records = []
    seen: set[str] = set()
    for number, raw in read_jsonl(path, objects=True, allow_empty=False):
        where = f"{path} line {number}"
        for key in ("input", "output", "profile"):
            if key not in raw:
                raise PersonagraphError(f"{where}: missing field {key!r}")
        for key in ("input", "output"):
            if not isinstance(raw[key], str) or not raw[key].strip():
                raise PersonagraphError(f"{where}: {key!r} must be a non-empty string")
        profile = raw["profile"]
        if not isinstance(profile, list) or not profile or not all(isinstance(p, dict) for p in profile):
            raise PersonagraphError(f"{where}: 'profile' must be a non-empty list of objects")
        for index, item in enumerate(profile):
            if not profile_text(item):
                raise PersonagraphError(f"{where}: profile item {index + 1} has no text field "
                                        f"({', '.join(TEXT_KEYS)} or any string)")
        record_id = str(raw.get("id", number))
        if record_id in seen:
            raise PersonagraphError(f"{where}: duplicate id {record_id!r}")
        seen.add(record_id)
        records.append(LongLaMPRecord(id=record_id, input=raw["input"].strip(), output=raw["output"].strip(),
                                      profile=profile))
        if limit is not None and len(records) >= limit:
            break
    return records


def profile_text(item: dict[str, Any]) -> str:
    """The text of a profile item: its known text fields in order, else every string field but ids/dates."""
    parts = [str(item[key]).strip() for key in TEXT_KEYS if isinstance(item.get(key), str) and item[key].strip()]
    if not parts:
        parts = [value.strip() for key, value in item.items()
                 if isinstance(value, str) and value.strip() and key not in DATE_KEYS and key != "id"]
    return "\n".join(parts)


def profile_time(item: dict[str, Any]) -> float | None:
    """A sortable timestamp of a profile item from its date field (epoch seconds, ISO date, year), if any."""
    for key in DATE_KEYS:
        value = item.get(key)
        if isinstance(value, bool) or value is None:
            continue
        if isinstance(value, int | float):
            return float(value)
        if isinstance(value, str) and value.strip():
            text = value.strip()
            if re.fullmatch(r"\d+(\.\d+)?", text):
                return float(text)
            for fmt in (None, "%m %d, %Y", "%B %d, %Y", "%d %B %Y", "%Y/%m/%d", "%m/%d/%Y"):
                try:
                    moment = datetime.fromisoformat(text) if fmt is None else datetime.strptime(text, fmt)
                except ValueError:
                    continue
                return moment.timestamp()
    return None


_WORD = re.compile(r"\w+", re.UNICODE)


def bm25_tokens(text: str) -> list[str]:
    """Lower-cased word tokens for BM25."""
    return _WORD.findall(text.lower())


def _top(scores: Sequence[float], k: int) -> list[int]:
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))  # ties: earlier item first
    return order[:k]


def retrieve(
    retriever: RetrieverName, query: str, profile: Sequence[dict[str, Any]], k: int, *,
    seed: int = 0, key: str = "", embedding_model: str | None = None,
) -> list[int]:
    """Indices of the ``k`` profile items to show for ``query``, best first.

    Args:
        retriever: ``bm25`` (rank-bm25 Okapi over word tokens), ``dense`` (cosine of sentence embeddings),
            ``recency`` (newest by date field; without dates, the last items of the list), ``random``.
        query: the task input.
        profile: the user's profile items.
        k: how many to keep (all of them when the profile is shorter).
        seed: seed of the random retriever (mixed with ``key`` so each record draws its own sample).
        key: the record id, for the random retriever.
        embedding_model: sentence-embedding model of the dense retriever (None = packaged MiniLM).
    """
    if k < 1:
        raise ValueError("k must be at least 1")
    texts = [profile_text(item) for item in profile]
    if retriever == "bm25":
        from rank_bm25 import BM25Okapi  # only for the bm25 retriever

        corpus = [bm25_tokens(text) or [""] for text in texts]
        return _top(list(BM25Okapi(corpus).get_scores(bm25_tokens(query))), k)
    if retriever == "dense":
        vectors = embed([query, *texts], embedding_model)
        return _top(list(vectors[1:] @ vectors[0]), k)
    if retriever == "recency":
        times = [profile_time(item) for item in profile]
        order = sorted(range(len(profile)), key=lambda i: (times[i] is None, -(times[i] or 0.0), -i))
        return order[:k]
    if retriever == "random":
        digest = int(hashlib.sha256(f"{seed}|{key}".encode()).hexdigest()[:16], 16)
        indices = list(range(len(profile)))
        return random.Random(digest).sample(indices, min(k, len(indices)))
    raise PersonagraphError(f"--retriever {retriever!r}: choose from {', '.join(RETRIEVERS)}")


def longlamp_messages(
    record: LongLaMPRecord, indices: Sequence[int], *, max_item_chars: int = 1200
) -> list[dict[str, str]]:
    """The generation prompt: the retrieved profile items (each cut to ``max_item_chars``), then the input."""
    shown = []
    for index in indices:
        text = profile_text(record.profile[index])
        if len(text) > max_item_chars:
            text = text[:max_item_chars].rsplit(" ", 1)[0] + " …"
        shown.append(f"- {text}".replace("\n", "\n  "))
    return load_prompt("longlamp_generation").messages(profile="\n".join(shown), input=record.input)


class LongLaMPGeneration(BaseModel):
    """One finished generation, as stored."""

    id: str
    retrieved: list[int]
    text: str
    response_time_s: float
    cached: bool = False


class LongLaMPConfig(BaseModel):
    """A LongLaMP run.

    Attributes:
        data: the JSONL file. model: model spec. retriever: bm25, dense, recency or random. k: items retrieved.
        limit: only the first N records. seed: random retriever seed. max_tokens: generation limit.
        embedding_model: dense retriever embeddings (None = packaged MiniLM).
        failures_as_worst: average empty generations into the means as zeros.
        retry_failed: a resumed run asks the records whose call failed again (False keeps them failed).
    """

    data: Path
    model: str
    retriever: RetrieverName = "bm25"
    k: int = Field(1, ge=1)
    limit: int | None = Field(None, ge=1)
    seed: Seed = 0
    max_tokens: int = Field(512, ge=1)
    temperature: float = Field(0.0, ge=0.0, le=2.0)
    embedding_model: str | None = None
    failures_as_worst: bool = False
    retry_failed: bool = True

    @property
    def unit(self) -> str:
        return f"{self.model}|{self.retriever}|k{self.k}"
