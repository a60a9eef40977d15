"""PersoBench: personalized response generation from persona sentences + dialogue context, then scoring.

Data: a CSV with columns ``personas, context, act_response`` (PersoBench's prompt files). Each row is
answered by the model under test as JSON — ``{"response": …}`` (vanilla) or ``{"reasoning": …,
"response": …}`` (chain of thought, reasoning first) — through the model layer, which applies the model's
chat template. A reply that cannot be parsed, or an empty response, is a failure: it counts in the failure
ratio and is kept out of the quality means. Every finished generation is stored at once, so a run resumes
by skipping what its run directory already holds.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from personagraph.version import __version__
from personagraph.errors import PersonagraphError
from personagraph.metrics.instructability import CostReport, cost_report
from personagraph.metrics.io import read_table, write_jsonl
from personagraph.metrics.scoring import ScoreConfig, ScoreItem, ScoreReport, ascore_items, prepare
from personagraph.metrics.text import persona_sentences
from personagraph.models import Meter, ModelClient, ModelSettings, parse_spec
from personagraph.prompts import load_prompt
from personagraph.store import RunStore

COLUMNS = ("personas", "context", "act_response")
KIND = "persobench"
Mode = Literal["vanilla", "cot"]


class PersoBenchItem(BaseModel):
    """One PersoBench row.

    Attributes:
        id: the row number in the file (1 = first data row), as a string.
        persona: the persona sentences.
        context: the dialogue so far (literal ``\\n`` sequences turned into line breaks).
        act_response: the reference (actual) response.
    """

    id: str
    persona: list[str]
    context: str
    act_response: str


def load_persobench(path: str | Path, limit: int | None = None) -> list[PersoBenchItem]:
    """Reads a PersoBench CSV (``personas, context, act_response``).

    Args:
        path: the CSV file.
        limit: keep only the first ``limit`` rows.

    Raises:
        PersonagraphError: missing file or column, empty file, a row with an empty cell (file and row named).
    """
    items = []
    for number, row in read_table(path, COLUMNS, delimiter=","):
        for column in COLUMNS:
            if not row[column].strip():
                raise PersonagraphError(f"{path} row {number}: empty {column!r}")
        persona = persona_sentences(row["personas"])
        if not persona:
            raise PersonagraphError(f"{path} row {number}: no persona sentence in 'personas'")
        context = row["context"].replace("\\n", "\n").strip()
        items.append(PersoBenchItem(id=str(number), persona=persona, context=context,
                                    act_response=row["act_response"].strip()))
        if limit is not None and len(items) >= limit:
            break
    return items


class VanillaReply(BaseModel):
    """The vanilla reply format."""

    response: str = Field(description="your next reply in the conversation")


class CoTReply(BaseModel):
    """The chain-of-thought reply format: reasoning first, then the response."""

    reasoning: str = Field(description="your brief step-by-step reasoning about what to reply")
    response: str = Field(description="your next reply in the conversation")


def persobench_messages(item: PersoBenchItem, mode: Mode) -> list[dict[str, str]]:
    """The chat messages asking for the next turn (``persobench_vanilla`` / ``persobench_cot`` prompt)."""
    persona = "\n".join(f"- {sentence}" for sentence in item.persona)
    return load_prompt(f"persobench_{mode}").messages(persona=persona, context=item.context)


class Generation(BaseModel):
    """One finished generation, as stored.

    Attributes:
        id: the item id.
        model: the model spec.
        mode: ``vanilla`` or ``cot``.
        response: the parsed response; None when the reply could not be parsed.
        reasoning: the chain-of-thought reasoning (cot only).
        raw: the model's text as received.
        error: why parsing failed, if it did.
        response_time_s: wall time of the call (0 when answered from the cache).
        cached: whether the call was answered from the run's response cache.
    """

    id: str
    model: str
    mode: Mode
    response: str | None
    reasoning: str | None = None
    raw: str = ""
    error: str | None = None
    response_time_s: float
    cached: bool = False


class CallFailed(Exception):
    """The model call itself failed (endpoint down, timeout): nothing to score; retried on resume."""


async def generate(item: PersoBenchItem, client: ModelClient, mode: Mode) -> Generation:
    """Asks the model for the next turn of one item.

    Raises:
        CallFailed: when the call failed before any reply arrived (not a model failure: not stored).
    """
    schema: type[BaseModel] = CoTReply if mode == "cot" else VanillaReply
    started = time.perf_counter()
    result = await client.structured(persobench_messages(item, mode), schema)
    elapsed = time.perf_counter() - started
    if not result.ok and not (result.error or "").startswith("invalid structured output"):
        raise CallFailed(result.error or "the model call failed")
    value = result.value
    return Generation(
        id=item.id, model=str(client.spec), mode=mode,
        response=getattr(value, "response", None) if result.ok else None,
        reasoning=getattr(value, "reasoning", None) if result.ok else None,
        raw=result.raw, error=None if result.ok else result.error,
        response_time_s=0.0 if result.cached else elapsed, cached=result.cached,
    )


class PersoBenchConfig(BaseModel):
    """A PersoBench run.

    Attributes:
        data: the CSV file.
        model: model spec under test.
        cot: chain-of-thought prompting instead of vanilla.
        limit: only the first N rows.
        score: metrics and the models that compute them.
        max_tokens: generation limit per reply.
        temperature: sampling temperature.
    """

    data: Path
    model: str
    cot: bool = False
    limit: int | None = Field(None, ge=1)
    score: ScoreConfig = Field(default_factory=ScoreConfig)
    max_tokens: int = Field(256, ge=1)
    temperature: float = Field(0.0, ge=0.0, le=2.0)

    @property
    def mode(self) -> Mode:
        return "cot" if self.cot else "vanilla"

    @property
    def unit(self) -> str:
        """The store unit of this model × mode (one run directory can hold several)."""
        return f"{self.model}|{self.mode}"


class PersoBenchSummary(BaseModel):
    """What a PersoBench run produced.

    Attributes:
        model: model spec. mode: vanilla or cot. data: the CSV.
        items: items in the run. generated: generations stored (this run and earlier).
        unfinished: items whose call failed this time (rerun the command to retry them).
        cost: failure ratio and response times (cached replies excluded from the times).
        scores: the metric report (means over the successful items unless failures_as_worst).
        llm_calls: calls sent this invocation. cache_hits: calls answered from the run's cache.
    """

    model: str
    mode: Mode
    data: str
    items: int
    generated: int
    unfinished: int
    cost: CostReport
    scores: ScoreReport
    llm_calls: int
    cache_hits: int


def _check_kind(store: RunStore) -> None:
    kind = store.get_meta("kind")
    if kind not in (None, KIND):
        raise PersonagraphError(f"{store.run_dir}: holds a {kind!r} run, not a persobench one; use another --run-dir")
    store.set_meta("kind", KIND)


async def run_persobench(
    config: PersoBenchConfig,
    run_dir: str | Path,
    *,
    settings: ModelSettings | None = None,
    on_item: Callable[[Generation | None], None] | None = None,
) -> PersoBenchSummary:
    """Generates (or resumes), scores and summarises a PersoBench run.

    Args:
        config: the run.
        run_dir: the run directory (reuse it to resume: stored generations are not asked again).
        settings: endpoint settings (base URL, API key, concurrency).
        on_item: called as each item finishes (None for a failed call), for progress display.

    Returns:
        The summary, also written to ``persobench_summary.json``; per-item rows go to ``persobench.jsonl``.

    Raises:
        PersonagraphError: bad data, an unknown model spec, a metric whose model is missing.
    """
    items = load_persobench(config.data, config.limit)
    parse_spec(config.model)
    await asyncio.to_thread(prepare, config.score)  # fail before generating if a metric cannot run
    store = RunStore(run_dir)
    try:
        _check_kind(store)
        store.set_meta(f"config:{config.unit}", config.model_dump(mode="json"))
        store.set_meta("versions", {"personagraph": __version__})
        store.set_meta(f"prompt:{config.mode}", load_prompt(f"persobench_{config.mode}").version)
        meter = Meter()
        client = ModelClient.create(config.model, KIND, store=store, meter=meter, settings=settings,
                                    temperature=config.temperature, max_tokens=config.max_tokens)
        done = {record["id"] for record in store.records(f"{KIND}.generation", unit=config.unit)}
        unfinished = 0

        async def one(item: PersoBenchItem) -> None:
            nonlocal unfinished
            try:
                generation = await generate(item, client, config.mode)
            except CallFailed:
                unfinished += 1
                if on_item:
                    on_item(None)
                return
            store.put(f"{KIND}.generation", f"{config.unit}|{item.id}", generation, unit=config.unit)
            if on_item:
                on_item(generation)

        await asyncio.gather(*(one(item) for item in items if item.id not in done))
        stored = {record["id"]: Generation.model_validate(record)
                  for record in store.records(f"{KIND}.generation", unit=config.unit)}
        generations = [stored[item.id] for item in items if item.id in stored]
        by_id = {item.id: item for item in items}
        score_items = [
            ScoreItem(response=g.response, reference=by_id[g.id].act_response, persona=by_id[g.id].persona,
                      context=by_id[g.id].context, where=f"{config.data} row {g.id}")
            for g in generations
        ]
        report = await ascore_items(score_items, config.score)
        cost = cost_report([g.response for g in generations],
                           [g.response_time_s for g in generations if not g.cached])
        summary = PersoBenchSummary(
            model=config.model, mode=config.mode, data=str(config.data), items=len(items),
            generated=len(generations), unfinished=unfinished, cost=cost, scores=report,
            llm_calls=meter.total_calls, cache_hits=meter.total_cache_hits,
        )
        rows = [
            {"id": g.id, "model": g.model, "mode": g.mode, "response": g.response, "reasoning": g.reasoning,
             "reference": by_id[g.id].act_response, "failed": failed, "error": g.error,
             "response_time_s": g.response_time_s, **numbers}
            for g, numbers, failed in zip(generations, report.rows, report.failed, strict=True)
        ]
        store.set_meta(f"summary:{config.unit}", summary.model_dump(mode="json", exclude={"scores": {"rows"}}))
        _write_outputs(store, rows, summary)
        return summary
    finally:
        store.close()


def _write_outputs(store: RunStore, rows: list[dict[str, Any]], summary: PersoBenchSummary) -> None:
    """``persobench_<model>_<mode>.jsonl`` (this unit's items) and ``persobench_summary.json`` (every unit)."""
    unit = f"{summary.model}|{summary.mode}"
    units = store.get_meta("persobench_units", [])
    if unit not in units:
        units.append(unit)
        store.set_meta("persobench_units", units)
    slug = f"{summary.model}_{summary.mode}".replace(":", "-").replace("/", "-")
    write_jsonl(store.run_dir / f"persobench_{slug}.jsonl", rows)
    summaries = {name: store.get_meta(f"summary:{name}") for name in units}
    (store.run_dir / "persobench_summary.json").write_text(json.dumps(summaries, indent=2), encoding="utf-8")
