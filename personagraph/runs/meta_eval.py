"""The ``meta-eval`` run: every judge scores every human-rated item (resumably); the summary holds the
judges' agreement with the humans (``judges/meta_eval.py`` loads items and computes the statistics).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from pydantic import Field

from personagraph.errors import PersonagraphError
from personagraph.judges import benchmarks, cards
from personagraph.judges.base import Judge
from personagraph.judges.judge import ready_protocol
from personagraph.judges.meta_eval import (
    ITEM_KIND,
    JUDGE_MAX_TOKENS,
    JUDGE_TEMPERATURE,
    RECORD_KIND,
    STORE_KIND,
    SUMMARY_FILE,
    Criterion,
    CriterionCatalogue,
    MetaEvalConfig,
    MetaItem,
    MetaVerdict,
    build_meta_summary,
    judge_item,
    load_items,
    verdict_id,
)
from personagraph.models import ModelSettings
from personagraph.runs.base import FailedItem, ProgressHandler, Run, Summary, synchronous
from personagraph.runs.plugins import check_judge_names, given_by_name, judge_for
from personagraph.schemas import short_id

KIND = STORE_KIND
STAGE = "verdicts"


class MetaEvalSummary(Summary):
    """``meta_eval.json``: agreement with human labels per criterion (or benchmark subset), overall and for
    the ensemble (the keys of :func:`~personagraph.judges.meta_eval.build_meta_summary`), the items file
    or the benchmarks read (files with their sha256, the sample), and the validity cards saved."""

    items: str = ""
    benchmarks: dict[str, Any] | None = None
    cards: list[str] = Field(default_factory=list)


async def run(
    config: MetaEvalConfig,
    run_dir: str | Path,
    *,
    settings: ModelSettings | None = None,
    judge_objects: list[Judge] | None = None,
    on_progress: ProgressHandler | None = None,
) -> MetaEvalSummary:
    """Judges every item with every judge (resumably) and returns the summary written to ``meta_eval.json``.

    Args:
        config: the items file, judges, criteria filter and rubric files.
        run_dir: the run directory (created if needed; reused to resume: stored verdicts are not
            asked again, failed ones unless ``config.retry_failed`` is off, and stored calls are never
            sent again).
        settings: endpoint settings shared by the judges (base URL, API key).
        judge_objects: judge objects (any :class:`~personagraph.judges.base.Judge`), each named in
            ``config.judges``.
        on_progress: receives a ``verdicts`` :class:`~personagraph.runs.base.ProgressEvent` per verdict
            (the total is announced once the items file is validated).
    """
    given = given_by_name(judge_objects or [], config.judges, "judge_objects", "judges")
    check_judge_names(config.judges, given)
    catalogue = CriterionCatalogue(config.rubric_files)
    loaded: benchmarks.Loaded | None = None
    if config.benchmark:
        local = Path(config.benchmark_dir) if config.benchmark_dir else None
        loaded = benchmarks.load(benchmarks.resolve(config.benchmark), benchmark_dir=local,
                                 sample=config.sample, seed=config.seed)
        items = loaded.items
    else:
        assert config.items is not None  # the config has one of the two
        items = load_items(config.items, catalogue)
    wanted: list[Criterion] = []
    if config.criteria:
        for name in config.criteria:
            try:
                criterion = catalogue.resolve(name)
            except PersonagraphError as exc:
                raise PersonagraphError(f"--criteria: {exc}") from None
            if criterion is None:
                raise PersonagraphError(f"--criteria: {catalogue.unknown(name)}")
            if criterion.key not in {c.key for c in wanted}:
                wanted.append(criterion)
        keys = {c.key for c in wanted}
        missing = [c.key for c in wanted if not any(i.criterion == c.key for i in items)]
        if missing:
            source = config.items or ", ".join(config.benchmark)
            raise PersonagraphError(f"--criteria: {source} has no records for {missing[0]}")
        items = [i for i in items if i.criterion in keys]
    criteria = {c.key: c for c in (catalogue.resolve(i.criterion) for i in items) if c is not None}
    judges = list(dict.fromkeys(config.judges))
    protocols = {spec: ready_protocol(config.judge_protocol, spec) for spec in judges}
    settings = (settings or ModelSettings()).model_copy(
        update={"concurrency": config.concurrency, "seed": config.seed}
    )
    with Run(KIND, run_dir, config, on_progress=on_progress, summary_file=SUMMARY_FILE,
             retry_failed=config.retry_failed) as the_run:
        the_run.record(
            prompts={f"judge {spec}": protocol.version for spec, protocol in protocols.items()}
            | {key: c.fingerprint for key, c in sorted(criteria.items())}
        )
        store, meter = the_run.store, the_run.meter
        for item in items:
            store.put(ITEM_KIND, short_id(item.key, item.section), item, unit=item.section)
        clients = {
            spec: judge_for(
                spec,
                "judge",
                given=given,
                store=store,
                meter=meter,
                settings=settings,
                temperature=JUDGE_TEMPERATURE,
                max_tokens=JUDGE_MAX_TOKENS,
            )
            for spec in judges
        }
        # one verdict per judged content: an item in two subsets (a reply rated twice) is judged once
        asking = {verdict_id(item, criteria[item.criterion], spec, protocols[spec]): (item, spec)
                  for item in items for spec in judges}
        todo = []
        for key, (item, spec) in asking.items():
            stored = store.get(RECORD_KIND, key)
            verdict = MetaVerdict.model_validate(stored) if stored is not None else None
            if verdict is None or the_run.pending(_failures([verdict])):
                todo.append((item, spec))
        asked = len(asking)
        the_run.expect(STAGE, asked, reused=asked - len(todo))
        gate = asyncio.Semaphore(config.concurrency)

        async def one(item: MetaItem, spec: str) -> None:
            async with gate:
                verdict = await judge_item(clients[spec], item, criteria[item.criterion], protocols[spec])
            store.put(RECORD_KIND, verdict.id, verdict, unit=item.criterion)
            the_run.advance(STAGE)

        await asyncio.gather(*(one(item, spec) for item, spec in todo))
        verdicts = [MetaVerdict.model_validate(v) for v in store.records(RECORD_KIND)]
        wanted_ids = {
            verdict_id(i, criteria[i.criterion], spec, protocols[spec]) for i in items for spec in judges
        }
        verdicts = [v for v in verdicts if v.id in wanted_ids]
        stats = build_meta_summary(
            items,
            verdicts,
            judges,
            seed=config.seed,
            n_resamples=config.n_resamples,
        )
        for section in stats["criteria"].values():
            c = criteria[section["criterion"]]
            section.update(name=c.rubric.task, source=c.source, rubric_scale=list(c.rubric.scale))
        summary = MetaEvalSummary(**stats, items=config.items or "", failures=_failures(verdicts),
                                  incomplete=len(wanted_ids) - len(verdicts),
                                  benchmarks=None if loaded is None else benchmark_record(config, loaded))
        if loaded is not None and not summary.failures and not summary.incomplete:
            summary.cards = [str(p) for p in cards.save_cards(summary.model_dump(mode="json"), protocols,
                                                               criteria)]
        return the_run.finish(summary)


run_sync = synchronous(run)


def benchmark_record(config: MetaEvalConfig, loaded: benchmarks.Loaded) -> dict[str, Any]:
    """What the summary says of the benchmarks read: names, files (where from, sha256, whether each is the
    full pinned file), the sample, each subset's description and published reference judge."""
    chosen = loaded.benchmarks
    return {
        "names": [b.name for b in chosen],
        "dir": str(Path(config.benchmark_dir).resolve()) if config.benchmark_dir else None,
        "sample": config.sample,
        "files": loaded.files,
        "subsets": {s.group: {"description": s.description, "reference": b.reference, "citation": b.citation,
                              "licence": b.licence}
                    for b in chosen for s in b.subsets},
    }


def _failures(verdicts: list[MetaVerdict]) -> list[FailedItem]:
    """The failed verdicts (a failed call, a reply that did not parse), as the outcome's failed items."""
    return [
        FailedItem(stage=STAGE, item=v.id, model=v.judge, reason=v.error)
        for v in verdicts
        if v.status != "ok"
    ]
