"""Scoring any set of responses with the reference-based metrics, one row of numbers per response.

Used by ``personagraph score`` (any JSONL of ``{response, reference?, persona?, context?}``) and by the
PersoBench runner. An empty or unparsable response is a failure: its numbers are the worst values (those
PersoBench assigns), it counts in the failure ratio, and the summary means leave it out unless
``failures_as_worst`` is set.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

from personagraph.embeddings import resolve_model
from personagraph.errors import PersonagraphError
from personagraph.metrics.diversity import corpus_distinct_n, distinct_n
from personagraph.metrics.fluency import ensure_wordnet, load_bertscore, meteor, rouge
from personagraph.metrics.instructability import is_failure
from personagraph.metrics.nli import load_nli
from personagraph.metrics.personalization import c_scores, persona_coverage, ue_scores
from personagraph.metrics.text import persona_sentences
from personagraph.runs.base import ProgressEvent, ProgressHandler

METRICS: dict[str, tuple[str, ...]] = {
    "rouge": ("rouge1", "rouge2", "rougeL"),
    "meteor": ("meteor",),
    "bertscore": ("bertscore_p", "bertscore_r", "bertscore_f1"),
    "dist": ("dist1", "dist2"),
    "c_score": ("c_score",),
    "ue_score": ("ue_score",),
    "coverage": ("persona_coverage",),
}
"""Metric families (what ``--metrics`` names) and the keys each one writes."""

ALIASES = {
    "rouge1": "rouge", "rouge2": "rouge", "rougel": "rouge", "bert": "bertscore", "bert_score": "bertscore",
    "dist1": "dist", "dist2": "dist", "distinct": "dist", "diversity": "dist", "cscore": "c_score",
    "consistency": "c_score", "uescore": "ue_score", "coherence": "ue_score",
    "persona_coverage": "coverage",
}

NEEDS: dict[str, tuple[str, ...]] = {
    "rouge": ("reference",), "meteor": ("reference",), "bertscore": ("reference",), "dist": (),
    "c_score": ("persona",), "ue_score": ("persona", "reference"), "coverage": ("persona",),
}

WORST: dict[str, float] = {
    "rouge1": 0.0, "rouge2": 0.0, "rougeL": 0.0, "meteor": 0.0,
    "bertscore_p": 0.0, "bertscore_r": 0.0, "bertscore_f1": 0.0,
    "dist1": 0.0, "dist2": 0.0, "c_score": -1.0, "ue_score": 0.0, "persona_coverage": 0.0,
}
"""A failed response's numbers: PersoBench's worst values (C-Score's minimum is −1, the rest 0)."""

NLI_METRICS = ("c_score", "ue_score")
DEFAULT_METRICS = ("rouge", "meteor", "bertscore", "dist", "coverage")
"""Metrics that need nothing beyond what ships: all but the NLI ones."""


def parse_metrics(spec: str | Sequence[str]) -> list[str]:
    """Metric families from ``"rouge,meteor,…"`` (or a list), in canonical order; ``all`` = every one.

    Raises:
        PersonagraphError: an unknown name.
    """
    names = [part.strip().lower() for part in (spec.split(",") if isinstance(spec, str) else spec)]
    names = [name for name in names if name]
    if not names:
        raise PersonagraphError(f"--metrics: name at least one of {', '.join(METRICS)}")
    if "all" in names:
        return list(METRICS)
    chosen = set()
    for name in names:
        family = ALIASES.get(name, name)
        if family not in METRICS:
            raise PersonagraphError(f"--metrics: unknown metric {name!r}; choose from {', '.join(METRICS)}, all")
        chosen.add(family)
    return [family for family in METRICS if family in chosen]


def metric_keys(metrics: Sequence[str]) -> list[str]:
    """The per-item number keys the metric families write, in order."""
    return [key for family in metrics for key in METRICS[family]]


class ScoreItem(BaseModel):
    """One response to score.

    Attributes:
        response: the response (None when it could not be parsed).
        reference: the reference response, for ROUGE/METEOR/BERTScore/UE-Score.
        persona: persona sentences, for C-Score/UE-Score/coverage.
        context: dialogue context (kept for the record; no metric reads it).
        where: where the item came from, for error messages (e.g. ``data.jsonl line 3``).
    """

    response: str | None
    reference: str | None = None
    persona: list[str] = Field(default_factory=list)
    context: str | None = None
    where: str = ""

    @classmethod
    def from_record(cls, record: dict[str, Any], where: str) -> ScoreItem:
        """Builds an item from a ``{response, reference?, persona?, context?}`` record.

        Raises:
            PersonagraphError: a missing ``response`` key or a field of the wrong type.
        """
        if "response" not in record:
            raise PersonagraphError(f"{where}: missing field 'response'")
        for key in ("response", "reference", "context"):
            value = record.get(key)
            if value is not None and not isinstance(value, str):
                raise PersonagraphError(f"{where}: field {key!r} must be a string, not {type(value).__name__}")
        persona = record.get("persona")
        if persona is not None and not (
            isinstance(persona, str) or (isinstance(persona, list) and all(isinstance(p, str) for p in persona))
        ):
            raise PersonagraphError(f"{where}: field 'persona' must be a string or a list of strings")
        return cls(response=record["response"], reference=record.get("reference"),
                   persona=persona_sentences(persona), context=record.get("context"), where=where)


class ScoreConfig(BaseModel):
    """Which metrics, and which models compute them.

    Attributes:
        metrics: metric families (see :data:`METRICS`).
        bertscore_model: BERTScore model id or folder; None for the packaged all-MiniLM-L6-v2.
        bertscore_layers: BERTScore layer; None for the model's default (6 for the packaged MiniLM).
        nli_model: NLI classifier for C-Score/UE-Score; None for ``$PERSONAGRAPH_NLI_MODEL``.
        embedding_model: sentence embeddings for persona coverage; None for the packaged MiniLM.
        rouge_stemmer: Porter-stem tokens before ROUGE.
        failures_as_worst: average failures into the means with their worst values.
    """

    metrics: list[str] = Field(default_factory=lambda: list(DEFAULT_METRICS))
    bertscore_model: str | None = None
    bertscore_layers: int | None = Field(None, ge=1)
    nli_model: str | None = None
    embedding_model: str | None = None
    rouge_stemmer: bool = False
    failures_as_worst: bool = False


class ScoreReport(BaseModel):
    """Numbers per response, their means, and the failure ratio.

    Attributes:
        metrics: the metric families computed.
        keys: the number keys of each row, in order.
        rows: one dict of numbers per item, in input order (worst values for failures).
        failed: per item, whether it was a failure.
        n: items scored.
        failures: failed items.
        failure_ratio: ``failures / n``.
        means: mean of each key over the successful items (over all items when ``failures_as_worst``).
        corpus: corpus-level numbers (``corpus_dist1``/``corpus_dist2`` over the successful responses).
        failures_as_worst: whether the means include the failures' worst values.
        models: which model produced which number (BERTScore, coverage embeddings, NLI).
    """

    metrics: list[str]
    keys: list[str]
    rows: list[dict[str, float]]
    failed: list[bool]
    n: int
    failures: int
    failure_ratio: float | None
    means: dict[str, float | None]
    corpus: dict[str, float | None] = Field(default_factory=dict)
    failures_as_worst: bool = False
    models: dict[str, str] = Field(default_factory=dict)


def check_items(items: Sequence[ScoreItem], metrics: Sequence[str]) -> None:
    """Checks that every item has what the chosen metrics read.

    Raises:
        PersonagraphError: naming the first item (file and line) that lacks a needed field.
    """
    for item in items:
        for family in metrics:
            for need in NEEDS[family]:
                if need == "reference" and not (item.reference or "").strip():
                    raise PersonagraphError(f"{item.where}: metric {family!r} needs a non-empty 'reference'")
                if need == "persona" and not item.persona:
                    raise PersonagraphError(f"{item.where}: metric {family!r} needs a non-empty 'persona'")


def prepare(config: ScoreConfig) -> dict[str, str]:
    """Loads what the chosen metrics need before any work starts, so a missing model fails early.

    Returns:
        Which model produces which number, for the report.

    Raises:
        PersonagraphError: no NLI model configured, WordNet missing, a model that cannot be loaded.
    """
    models: dict[str, str] = {}
    if "meteor" in config.metrics:
        ensure_wordnet()
    if "bertscore" in config.metrics:
        models["bertscore"] = load_bertscore(config.bertscore_model, config.bertscore_layers).label
    if "coverage" in config.metrics:
        models["persona_coverage"] = f"embeddings: {resolve_model(config.embedding_model)[1]}"
    if any(name in config.metrics for name in NLI_METRICS):
        models["nli"] = f"nli: {load_nli(config.nli_model).model_name}"
    return models


def score_items(
    items: Sequence[ScoreItem], config: ScoreConfig, on_progress: ProgressHandler | None = None
) -> ScoreReport:
    """Scores responses with the configured metrics (CPU-bound; see :func:`ascore_items`).

    Args:
        items: the responses with their references and personas.
        config: metrics and models.
        on_progress: hears ``metrics``: one step per metric computed over every response.

    Returns:
        The per-item numbers, means, corpus-level numbers and failure ratio.

    Raises:
        PersonagraphError: an item lacking a field a metric needs, or a model that cannot be loaded.
    """
    metrics = list(config.metrics)
    keys = metric_keys(metrics)
    check_items(items, metrics)
    models = prepare(config)
    failed = [is_failure(item.response) for item in items]
    ok = [i for i, bad in enumerate(failed) if not bad]
    rows: list[dict[str, float]] = [{key: WORST[key] for key in keys} if bad else {} for bad in failed]
    responses = [str(items[i].response) for i in ok]
    references = [str(items[i].reference or "") for i in ok]
    personas = [items[i].persona for i in ok]

    def compute(metric: str) -> dict[str, Sequence[float]]:
        """The metric's numbers for every usable response, by key."""
        if metric == "rouge":
            scores = [rouge(r, ref, use_stemmer=config.rouge_stemmer)
                      for r, ref in zip(responses, references, strict=True)]
            return {key: [getattr(s, key) for s in scores] for key in METRICS["rouge"]}
        if metric == "meteor":
            return {"meteor": [meteor(r, ref) for r, ref in zip(responses, references, strict=True)]}
        if metric == "bertscore":
            bertscore = load_bertscore(config.bertscore_model, config.bertscore_layers)
            bert = bertscore.score(responses, references)
            return {"bertscore_p": [b.p for b in bert], "bertscore_r": [b.r for b in bert],
                    "bertscore_f1": [b.f1 for b in bert]}
        if metric == "dist":
            return {"dist1": [distinct_n(r, 1) for r in responses],
                    "dist2": [distinct_n(r, 2) for r in responses]}
        if metric == "c_score":
            return {"c_score": c_scores(load_nli(config.nli_model), responses, personas)}
        if metric == "ue_score":
            return {"ue_score": ue_scores(load_nli(config.nli_model), responses, personas, references)}
        return {"persona_coverage": persona_coverage(responses, personas, model=config.embedding_model)}

    emit = on_progress or (lambda event: None)
    emit(ProgressEvent("metrics", 0, len(metrics)))
    for done, metric in enumerate(metrics, 1):
        for key, values in compute(metric).items():
            for i, value in zip(ok, values, strict=True):
                rows[i][key] = float(value)
        emit(ProgressEvent("metrics", done, len(metrics)))

    counted = range(len(items)) if config.failures_as_worst else ok
    means = {
        key: (sum(rows[i][key] for i in counted) / len(counted) if counted else None) for key in keys
    }
    corpus: dict[str, float | None] = {}
    if "dist" in metrics:
        corpus = {
            "corpus_dist1": corpus_distinct_n(responses, 1) if responses else None,
            "corpus_dist2": corpus_distinct_n(responses, 2) if responses else None,
        }
    return ScoreReport(
        metrics=metrics, keys=keys, rows=[{key: row[key] for key in keys} for row in rows], failed=failed,
        n=len(items), failures=sum(failed), failure_ratio=sum(failed) / len(items) if items else None,
        means=means, corpus=corpus, failures_as_worst=config.failures_as_worst, models=models,
    )


async def ascore_items(items: Sequence[ScoreItem], config: ScoreConfig) -> ScoreReport:
    """:func:`score_items` in a worker thread, so an event loop keeps running while models compute."""
    return await asyncio.to_thread(score_items, items, config)
