"""The ``longlamp`` run: retrieve profile items, generate (resumably) and score LongLaMP records
(``metrics/longlamp.py`` loads the data, retrieves and builds the prompt).

One run directory holds several units (model × retriever × k): ``longlamp_summary.json`` has every
unit's summary, ``longlamp_<unit>.jsonl`` each unit's rows.

Items: each record is one ``longlamp.generation`` record — a :class:`LongLaMPGeneration` (an empty one
too: the metrics score it), or ``{id, status: "failed", error}`` when the call failed: a failed item,
asked again on resume unless ``retry_failed`` is off.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path

from personagraph.metrics.fluency import ensure_wordnet
from personagraph.metrics.instructability import CostReport, cost_report
from personagraph.metrics.io import write_jsonl
from personagraph.metrics.longlamp import (
    KEPT_METRICS,
    KIND,
    LongLaMPConfig,
    LongLaMPGeneration,
    LongLaMPRecord,
    RetrieverName,
    load_longlamp,
    longlamp_messages,
    retrieve,
)
from personagraph.metrics.scoring import ScoreConfig, ScoreItem, ScoreReport, ascore_items
from personagraph.models import ModelClient, ModelSettings, parse_spec
from personagraph.prompts import load_prompt
from personagraph.records import StoredItem, register_record_type
from personagraph.runs.base import (
    GENERATIONS,
    ProgressHandler,
    Run,
    Summary,
    failed_records,
    generate_pending,
    is_failed,
    synchronous,
)

SUMMARY_FILE = "longlamp_summary.json"
GENERATION = f"{KIND}.generation"
register_record_type(GENERATION, StoredItem)


class LongLaMPSummary(Summary):
    """What a LongLaMP run produced: ROUGE-1, ROUGE-L, METEOR means, failure ratio, response time;
    ``unfinished``: records without a generation (their call failed: listed in ``failures``)."""

    model: str
    retriever: RetrieverName
    k: int
    data: str
    items: int
    generated: int
    unfinished: int
    cost: CostReport
    scores: ScoreReport


def _keep(report: ScoreReport, keys: Sequence[str]) -> ScoreReport:
    return report.model_copy(
        update={
            "keys": list(keys),
            "rows": [{k: row[k] for k in keys} for row in report.rows],
            "means": {k: report.means[k] for k in keys},
        }
    )


async def run(
    config: LongLaMPConfig,
    run_dir: str | Path,
    *,
    settings: ModelSettings | None = None,
    on_progress: ProgressHandler | None = None,
) -> LongLaMPSummary:
    """Retrieves, generates (or resumes) and scores a LongLaMP run.

    Returns:
        The summary, also in ``longlamp_summary.json``; per-item rows in ``longlamp_<unit>.jsonl``.

    Raises:
        PersonagraphError: bad data, an unknown model spec, WordNet missing.
    """
    records = load_longlamp(config.data, config.limit)
    parse_spec(config.model)
    ensure_wordnet()
    with Run(
        KIND, run_dir, config, unit=config.unit, on_progress=on_progress, summary_file=SUMMARY_FILE,
        retry_failed=config.retry_failed,
    ) as the_run:
        the_run.record(prompt=load_prompt("longlamp_generation").version)
        store, meter = the_run.store, the_run.meter
        sampling = {"temperature": config.temperature, "max_tokens": config.max_tokens}
        client = ModelClient.create(
            config.model, KIND, store=store, meter=meter, settings=settings, **sampling
        )
        retrieving = asyncio.Lock()  # one retrieval at a time, off the event loop (the dense one embeds)

        async def one(record: LongLaMPRecord) -> LongLaMPGeneration | dict[str, str | None]:
            async with retrieving:
                indices = await asyncio.to_thread(
                    retrieve, config.retriever, record.input, record.profile, config.k,
                    seed=config.seed, key=record.id, embedding_model=config.embedding_model,
                )
            started = time.perf_counter()
            result = await client.complete(longlamp_messages(record, indices))
            elapsed = time.perf_counter() - started
            if not result.ok:
                return {"id": record.id, "status": "failed", "error": result.error}
            return LongLaMPGeneration(
                id=record.id,
                retrieved=indices,
                text=result.text.strip(),
                response_time_s=0.0 if result.cached else elapsed,
                cached=result.cached,
            )

        current = await generate_pending(the_run, records, one, kind=GENERATION, unit=config.unit,
                                         model=config.model, stage=config.unit)
        generations = [LongLaMPGeneration.model_validate(r) for r in current if not is_failed(r)]
        by_id = {r.id: r for r in records}
        items = [
            ScoreItem(response=g.text, reference=by_id[g.id].output, where=f"{config.data} record {g.id}")
            for g in generations
        ]
        report = _keep(
            await ascore_items(
                items, ScoreConfig(metrics=["rouge", "meteor"], failures_as_worst=config.failures_as_worst)
            ),
            KEPT_METRICS,
        )
        summary = LongLaMPSummary(
            model=config.model,
            retriever=config.retriever,
            k=config.k,
            data=str(config.data),
            items=len(records),
            generated=len(generations),
            unfinished=len(records) - len(generations),
            failures=failed_records(GENERATIONS, current, config.model),
            incomplete=len(records) - len(current),
            cost=cost_report(
                [g.text for g in generations], [g.response_time_s for g in generations if not g.cached]
            ),
            scores=report,
        )
        rows = [
            {
                "id": g.id,
                "retrieved": g.retrieved,
                "generation": g.text,
                "target": by_id[g.id].output,
                "failed": failed,
                "response_time_s": g.response_time_s,
                **numbers,
            }
            for g, numbers, failed in zip(generations, report.rows, report.failed, strict=True)
        ]
        slug = config.unit.replace(":", "-").replace("/", "-").replace("|", "_")
        write_jsonl(store.run_dir / f"longlamp_{slug}.jsonl", rows)
        return the_run.finish_unit(summary, exclude={"scores": {"rows"}})


run_sync = synchronous(run)
