"""Profile retrieval for personalized long-form writing (LongLaMP).

Given a user's profile (their past documents) and an input, retrieve k profile items — BM25 (rank-bm25),
dense (sentence embeddings, the packaged MiniLM by default), most recent, or random — put them in the
prompt, generate, and score ROUGE-1, ROUGE-L and METEOR against the target. An empty generation is a
failure: counted in the failure ratio and kept out of the means unless asked. Data: JSONL records
``{"input", "output", "profile": [{...}, ...]}`` (an optional ``id``).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import re
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from personagraph.version import __version__
from personagraph.embeddings import embed
from personagraph.errors import PersonagraphError
from personagraph.files import read_jsonl
from personagraph.metrics.instructability import CostReport, cost_report
from personagraph.metrics.io import write_jsonl
from personagraph.metrics.scoring import ScoreConfig, ScoreItem, ScoreReport, ascore_items
from personagraph.models import Meter, ModelClient, ModelSettings, parse_spec
from personagraph.prompts import load_prompt
from personagraph.store import RunStore

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
        from rank_bm25 import BM25Okapi

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
    """

    data: Path
    model: str
    retriever: RetrieverName = "bm25"
    k: int = Field(1, ge=1)
    limit: int | None = Field(None, ge=1)
    seed: int = 0
    max_tokens: int = Field(512, ge=1)
    temperature: float = Field(0.0, ge=0.0, le=2.0)
    embedding_model: str | None = None
    failures_as_worst: bool = False

    @property
    def unit(self) -> str:
        return f"{self.model}|{self.retriever}|k{self.k}"


class LongLaMPSummary(BaseModel):
    """What a LongLaMP run produced: ROUGE-1, ROUGE-L, METEOR means, failure ratio, response time."""

    model: str
    retriever: RetrieverName
    k: int
    data: str
    items: int
    generated: int
    unfinished: int
    cost: CostReport
    scores: ScoreReport
    llm_calls: int
    cache_hits: int


def _keep(report: ScoreReport, keys: Sequence[str]) -> ScoreReport:
    return report.model_copy(update={
        "keys": list(keys), "rows": [{k: row[k] for k in keys} for row in report.rows],
        "means": {k: report.means[k] for k in keys},
    })


async def run_longlamp(
    config: LongLaMPConfig, run_dir: str | Path, *, settings: ModelSettings | None = None,
    on_item: Callable[[LongLaMPGeneration | None], None] | None = None,
) -> LongLaMPSummary:
    """Retrieves, generates (or resumes) and scores a LongLaMP run.

    Returns:
        The summary, also in ``longlamp_summary.json``; per-item rows in ``longlamp_<unit>.jsonl``.

    Raises:
        PersonagraphError: bad data, an unknown model spec, WordNet missing.
    """
    from personagraph.metrics.fluency import ensure_wordnet

    records = load_longlamp(config.data, config.limit)
    parse_spec(config.model)
    ensure_wordnet()
    store = RunStore(run_dir)
    try:
        kind = store.get_meta("kind")
        if kind not in (None, KIND):
            raise PersonagraphError(f"{run_dir}: holds a {kind!r} run, not a longlamp one; use another --run-dir")
        store.set_meta("kind", KIND)
        store.set_meta(f"config:{config.unit}", config.model_dump(mode="json"))
        store.set_meta("versions", {"personagraph": __version__})
        store.set_meta("prompt", load_prompt("longlamp_generation").version)
        meter = Meter()
        client = ModelClient.create(config.model, KIND, store=store, meter=meter, settings=settings,
                                    temperature=config.temperature, max_tokens=config.max_tokens)
        done = {r["id"] for r in store.records(f"{KIND}.generation", unit=config.unit)}
        todo = [r for r in records if r.id not in done]
        retrieved = await asyncio.to_thread(lambda: [
            retrieve(config.retriever, r.input, r.profile, config.k, seed=config.seed, key=r.id,
                     embedding_model=config.embedding_model) for r in todo])
        unfinished = 0

        async def one(record: LongLaMPRecord, indices: list[int]) -> None:
            nonlocal unfinished
            started = time.perf_counter()
            result = await client.complete(longlamp_messages(record, indices))
            elapsed = time.perf_counter() - started
            if not result.ok:
                unfinished += 1
                if on_item:
                    on_item(None)
                return
            generation = LongLaMPGeneration(id=record.id, retrieved=indices, text=result.text.strip(),
                                            response_time_s=0.0 if result.cached else elapsed, cached=result.cached)
            store.put(f"{KIND}.generation", f"{config.unit}|{record.id}", generation, unit=config.unit)
            if on_item:
                on_item(generation)

        await asyncio.gather(*(one(r, ix) for r, ix in zip(todo, retrieved, strict=True)))
        stored = {r["id"]: LongLaMPGeneration.model_validate(r)
                  for r in store.records(f"{KIND}.generation", unit=config.unit)}
        generations = [stored[r.id] for r in records if r.id in stored]
        by_id = {r.id: r for r in records}
        items = [ScoreItem(response=g.text, reference=by_id[g.id].output, where=f"{config.data} record {g.id}")
                 for g in generations]
        report = _keep(await ascore_items(items, ScoreConfig(metrics=["rouge", "meteor"],
                                                             failures_as_worst=config.failures_as_worst)),
                       KEPT_METRICS)
        summary = LongLaMPSummary(
            model=config.model, retriever=config.retriever, k=config.k, data=str(config.data), items=len(records),
            generated=len(generations), unfinished=unfinished,
            cost=cost_report([g.text for g in generations], [g.response_time_s for g in generations if not g.cached]),
            scores=report, llm_calls=meter.total_calls, cache_hits=meter.total_cache_hits,
        )
        rows = [{"id": g.id, "retrieved": g.retrieved, "generation": g.text, "target": by_id[g.id].output,
                 "failed": failed, "response_time_s": g.response_time_s, **numbers}
                for g, numbers, failed in zip(generations, report.rows, report.failed, strict=True)]
        slug = config.unit.replace(":", "-").replace("/", "-").replace("|", "_")
        write_jsonl(store.run_dir / f"longlamp_{slug}.jsonl", rows)
        store.set_meta(f"summary:{config.unit}", summary.model_dump(mode="json", exclude={"scores": {"rows"}}))
        units = store.get_meta("longlamp_units", [])
        if config.unit not in units:
            store.set_meta("longlamp_units", [*units, config.unit])
            units = [*units, config.unit]
        (store.run_dir / "longlamp_summary.json").write_text(
            json.dumps({u: store.get_meta(f"summary:{u}") for u in units}, indent=2), encoding="utf-8")
        return summary
    finally:
        store.close()

