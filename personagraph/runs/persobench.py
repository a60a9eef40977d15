"""The ``persobench`` run: generate personalized replies (vanilla or CoT) for PersoBench items, resumably,
and score them (``metrics/persobench.py`` loads the data and asks the model; ``metrics/scoring.py`` scores).

One run directory holds several units (model × mode): ``persobench_summary.json`` has every unit's summary,
``persobench_<model>_<mode>.jsonl`` each unit's rows.

Items: each row is one ``persobench.generation`` record — a :class:`Generation` (a reply that did not
parse is one too: PersoBench scores it as the model's failure), or ``{id, status: "failed", error}`` when
the call itself failed (endpoint down): a failed item, asked again on resume unless ``retry_failed`` is off.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from personagraph.metrics.instructability import CostReport, cost_report
from personagraph.metrics.io import write_jsonl
from personagraph.metrics.persobench import (
    KIND,
    CallFailed,
    Generation,
    Mode,
    PersoBenchConfig,
    PersoBenchItem,
    generate,
    load_persobench,
)
from personagraph.metrics.scoring import ScoreItem, ScoreReport, ascore_items, prepare
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

SUMMARY_FILE = "persobench_summary.json"
GENERATION = f"{KIND}.generation"
register_record_type(GENERATION, StoredItem)


class PersoBenchSummary(Summary):
    """What a PersoBench run produced.

    Attributes:
        model: model spec. mode: vanilla or cot. data: the CSV.
        items: items in the run. generated: generations stored (this run and earlier).
        unfinished: items without a generation (their call failed: listed in ``failures``).
        cost: failure ratio and response times (cached replies excluded from the times).
        scores: the metric report (means over the successful items unless failures_as_worst).
    """

    model: str
    mode: Mode
    data: str
    items: int
    generated: int
    unfinished: int
    cost: CostReport
    scores: ScoreReport


async def run(
    config: PersoBenchConfig,
    run_dir: str | Path,
    *,
    settings: ModelSettings | None = None,
    on_progress: ProgressHandler | None = None,
) -> PersoBenchSummary:
    """Generates (or resumes), scores and summarises a PersoBench run.

    Args:
        config: the run.
        run_dir: the run directory (reuse it to resume: stored generations are not asked again).
        settings: endpoint settings (base URL, API key, concurrency).
        on_progress: receives a progress event (stage ``<model> (<mode>)``) as each item finishes or fails.

    Returns:
        The summary, also written to ``persobench_summary.json``; per-item rows go to ``persobench.jsonl``.

    Raises:
        PersonagraphError: bad data, an unknown model spec, a metric whose model is missing.
    """
    items = load_persobench(config.data, config.limit)
    parse_spec(config.model)
    await asyncio.to_thread(prepare, config.score)  # fail before generating if a metric cannot run
    with Run(
        KIND, run_dir, config, unit=config.unit, on_progress=on_progress, summary_file=SUMMARY_FILE,
        retry_failed=config.retry_failed,
    ) as the_run:
        the_run.record(**{f"prompt:{config.mode}": load_prompt(f"persobench_{config.mode}").version})
        store, meter = the_run.store, the_run.meter
        sampling = {"temperature": config.temperature, "max_tokens": config.max_tokens}
        client = ModelClient.create(
            config.model, KIND, store=store, meter=meter, settings=settings, **sampling
        )

        async def one(item: PersoBenchItem) -> Generation | dict[str, str]:
            try:
                return await generate(item, client, config.mode)
            except CallFailed as exc:
                return {"id": item.id, "status": "failed", "error": str(exc)}

        current = await generate_pending(the_run, items, one, kind=GENERATION, unit=config.unit,
                                         model=config.model, stage=f"{config.model} ({config.mode})")
        generations = [Generation.model_validate(r) for r in current if not is_failed(r)]
        by_id = {item.id: item for item in items}
        score_items = [
            ScoreItem(
                response=g.response,
                reference=by_id[g.id].act_response,
                persona=by_id[g.id].persona,
                context=by_id[g.id].context,
                where=f"{config.data} row {g.id}",
            )
            for g in generations
        ]
        report = await ascore_items(score_items, config.score)
        cost = cost_report(
            [g.response for g in generations], [g.response_time_s for g in generations if not g.cached]
        )
        summary = PersoBenchSummary(
            model=config.model,
            mode=config.mode,
            data=str(config.data),
            items=len(items),
            generated=len(generations),
            unfinished=len(items) - len(generations),
            cost=cost,
            scores=report,
            failures=failed_records(GENERATIONS, current, config.model),
            incomplete=len(items) - len(current),
        )
        rows = [
            {
                "id": g.id,
                "model": g.model,
                "mode": g.mode,
                "response": g.response,
                "reasoning": g.reasoning,
                "reference": by_id[g.id].act_response,
                "failed": failed,
                "error": g.error,
                "response_time_s": g.response_time_s,
                **numbers,
            }
            for g, numbers, failed in zip(generations, report.rows, report.failed, strict=True)
        ]
        slug = f"{summary.model}_{summary.mode}".replace(":", "-").replace("/", "-")
        write_jsonl(store.run_dir / f"persobench_{slug}.jsonl", rows)
        return the_run.finish_unit(summary, exclude={"scores": {"rows"}})


run_sync = synchronous(run)
