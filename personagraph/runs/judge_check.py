"""The ``judge-check`` run: a metamorphic test of judges, no human labels needed.

Input is a finished eval run (``from_run``: its personas, questions and answers; up to ``per_task``
answers per task) or a meta-eval items file (``items``: id, persona, question, response, criterion,
human, scale; see :mod:`personagraph.judges.meta_eval`). Every answer gets the variants of
:mod:`personagraph.judges.validity` (built once, seeded, saved as ``check_variant`` records), and every
judge scores every original and variant through the model layer: concurrent, each verdict a
``check_verdict`` record as it finishes, so a re-run asks nothing already answered and a finished run
makes 0 calls. Judges read the rubric alone (no exemplars), as in meta-eval, so an original and its
persona swap are judged alike. ``judge_check.json`` holds the figures per judge and variant and a
verdict line per judge.

Answers that broke persona in the eval run (a refusal marker) are left out, and so are items-file
records rated below the middle of their human scale: the effect of a variant on an answer that was
already out of persona is not known.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, model_validator

from personagraph.agents.controls import control_kind
from personagraph.environments import task_by_name
from personagraph.errors import PersonagraphError
from personagraph.judges.base import Judge
from personagraph.judges.judge import ready_protocol, score_response
from personagraph.judges.meta_eval import CriterionCatalogue, load_items, question_text
from personagraph.judges.rubrics import Rubric, load_rubric
from personagraph.judges.validity import (
    CONTRADICTION_CRITERION,
    CONTRAST_FILE,
    TEXT_FILE,
    VARIANT_KINDS,
    CheckItem,
    CheckVerdict,
    Judgement,
    JudgeResult,
    Thresholds,
    Variant,
    VariantKind,
    VariantStats,
    baseline_results,
    build_variant,
    judge_results,
    original_judgement,
    variant_id,
    variant_judgement,
    verdict_id,
)
from personagraph.models import ModelClient, ModelSettings, parse_spec
from personagraph.models.settings import MAX_CONCURRENCY
from personagraph.models.spec import DEFAULT_JUDGE
from personagraph.prompts import load_prompt
from personagraph.records import register_record_type
from personagraph.resources import data_hash
from personagraph.runs.base import FailedItem, ProgressHandler, Run, Summary, synchronous
from personagraph.runs.plugins import check_judge_names, given_by_name, judge_for
from personagraph.schemas import Answer, Persona, Question, Seed
from personagraph.store import RunStore

KIND = "judge-check"
SUMMARY_FILE = "judge_check.json"
EVAL_SUBDIR = "judge-check"  # eval --judge-check N runs the check in RUN_DIR/judge-check
ITEM_KIND = "check_item"
VARIANT_KIND = "check_variant"
VERDICT_KIND = "check_verdict"
register_record_type(ITEM_KIND, CheckItem)
register_record_type(VARIANT_KIND, Variant)
register_record_type(VERDICT_KIND, CheckVerdict)
PROMPTS = ("variant_generic", "variant_contradiction")
STAGE_VERDICTS = "check verdicts"  # not "verdicts": eval --judge-check shows both stages in one display


class JudgeCheckConfig(BaseModel):
    """Everything that defines a judge check (recorded in the run directory, without secrets)."""

    from_run: str | None = None  # a finished eval run directory
    items: str | None = None  # a meta-eval items file (JSONL or CSV)
    judges: list[str] = Field(default_factory=list)  # default: the eval run's judges, else the default judge
    generator: str | None = (
        None  # writes generic rewrites and contradictions; default: the run's, else the first judge
    )
    per_task: int | None = Field(None, ge=1)  # answers per task taken from the run (seeded choice); None: all
    variants: list[VariantKind] = Field(default_factory=lambda: list(VARIANT_KINDS))
    judge_protocol: str | None = None  # judges/protocols.py; None: the default for each judge
    rubric_files: list[str] = Field(default_factory=list)  # user rubrics an items file's criteria may name
    concurrency: int = Field(8, ge=1, le=MAX_CONCURRENCY)
    seed: Seed = 0
    retry_failed: bool = True  # a resumed run builds failed variants and asks failed verdicts again
    n_resamples: int = Field(1000, ge=100, le=100_000)
    min_auc: float = Field(0.7, ge=0, le=1)  # swap AUC below this warns
    min_caught: float = Field(1.0, ge=0, le=1)  # share of AI disclosures the judge itself must catch
    max_judge_tokens: int = Field(256, ge=16, le=8192)
    max_variant_tokens: int = Field(400, ge=16, le=8192)

    @model_validator(mode="after")
    def _one_source(self) -> JudgeCheckConfig:
        if (self.from_run is None) == (self.items is None):
            raise ValueError("give exactly one of from_run (an eval run directory) or items (an items file)")
        self.variants = list(dict.fromkeys(self.variants))
        self.judges = list(dict.fromkeys(self.judges))
        if not self.variants:
            raise ValueError("variants: at least one is needed")
        return self

    @property
    def thresholds(self) -> Thresholds:
        return Thresholds(min_auc=self.min_auc, min_caught=self.min_caught)


class JudgeCheckSummary(Summary):
    """``judge_check.json``: per judge the figures per variant kind and the verdict line."""

    source: str = ""
    judges: list[str] = Field(default_factory=list)
    protocols: dict[str, str] = Field(default_factory=dict)  # judge → the protocol it was asked with
    generator: str = ""
    n_items: int = 0
    skipped: int = 0  # answers left out: persona breaks in the run, low human ratings in an items file
    variants: dict[str, dict[str, int]] = Field(default_factory=dict)  # kind → built / failed
    failed_verdicts: int = 0
    results: dict[str, JudgeResult] = Field(default_factory=dict)
    # baseline → variant kind → its figures (judges/validity.baseline_results): what a word count sees
    baselines: dict[str, dict[str, VariantStats]] = Field(default_factory=dict)


class CheckInput(BaseModel):
    """What a check works on: the answers, the personas they came with, and the source's defaults."""

    items: list[CheckItem]
    rubrics: dict[str, Rubric]  # criterion key → rubric
    personas: list[str]
    skipped: int = 0
    judges: list[str] = Field(default_factory=list)
    generator: str | None = None


# --- inputs ---------------------------------------------------------------------------------------
def items_from_run(run_dir: str | Path, *, per_task: int | None, seed: int) -> CheckInput:
    """Up to ``per_task`` answers per task (seeded choice) of a finished eval run, with its personas.

    Raises:
        PersonagraphError: when the directory is not an eval run or holds no answers to check.
    """
    where = f"--from {run_dir}"
    if not (Path(run_dir) / "run.sqlite").is_file():
        raise PersonagraphError(f"{where}: not a run directory (no run.sqlite)")
    store = RunStore(run_dir, readonly=True)
    try:
        kind = store.get_meta("kind")
        if kind != "eval":
            raise PersonagraphError(f"{where}: holds a {kind or 'unknown'} run, not an eval run")
        config: dict[str, Any] = store.get_meta("config") or {}
        personas = {
            p.id: p.description for p in (Persona.model_validate(x) for x in config.get("personas", []))
        }
        questions = {q["id"]: Question.model_validate(q) for q in store.records("question")}
        answers = sorted((Answer.model_validate(a) for a in store.records("answer")), key=lambda a: a.id)
    finally:
        store.close()
    usable = [
        a
        for a in answers
        if a.status == "ok" and a.text.strip() and a.question_id in questions and a.persona_id in personas
        and control_kind(a.model) is None and a.sample == 0  # agents under test (no control arm), once each
    ]
    skipped = sum(1 for a in usable if a.refusal)
    by_task: dict[str, list[Answer]] = {}
    for answer in usable:
        if not answer.refusal:
            by_task.setdefault(answer.task, []).append(answer)
    rng = random.Random(seed)
    items: list[CheckItem] = []
    rubrics: dict[str, Rubric] = {}
    for task_name in sorted(by_task):
        task = task_by_name(task_name)
        if task is None:
            raise PersonagraphError(f"{where}: answer task {task_name!r} is not a known task")
        chosen = by_task[task_name]
        if per_task is not None and len(chosen) > per_task:
            chosen = sorted(rng.sample(chosen, per_task), key=lambda a: a.id)
        rubrics[task.rubric] = load_rubric(task.rubric)
        items += [
            CheckItem(
                id=a.id,
                persona=personas[a.persona_id],
                question=questions[a.question_id].text,
                response=a.text,
                criterion=task.rubric,
                task=task.name,
            )
            for a in chosen
        ]
    if not items:
        raise PersonagraphError(f"{where}: no finished in-persona answers to check")
    return CheckInput(
        items=items,
        rubrics=rubrics,
        personas=sorted(set(personas.values())),
        skipped=skipped,
        judges=list(config.get("judges") or []),
        generator=config.get("generator"),
    )


def items_from_file(path: str | Path, rubric_files: list[str]) -> CheckInput:
    """The records of a meta-eval items file rated at least the middle of their human scale.

    Raises:
        PersonagraphError: for a bad file (one line naming the row), or when no record is left.
    """
    catalogue = CriterionCatalogue(rubric_files)
    records = load_items(path, catalogue)
    kept = [r for r in records if r.human_mean >= (r.scale[0] + r.scale[1]) / 2]
    if not kept:
        raise PersonagraphError(
            f"--items {path}: no record rated at least the middle of its human scale "
            "(a check needs answers that are in persona)"
        )
    rubrics: dict[str, Rubric] = {}
    for record in kept:
        criterion = catalogue.resolve(record.criterion)
        if criterion is not None:
            rubrics[criterion.key] = criterion.rubric
    items = [
        CheckItem(
            id=r.id,
            persona=r.persona,
            question=question_text(r),
            response=r.response,
            criterion=r.criterion,
            task=rubrics[r.criterion].task,
            contradiction=r.contradiction,
        )
        for r in kept
    ]
    personas = sorted({r.persona for r in records if r.persona.strip()})
    return CheckInput(items=items, rubrics=rubrics, personas=personas, skipped=len(records) - len(kept))


def load_input(config: JudgeCheckConfig) -> CheckInput:
    """The check's answers from ``from_run`` or ``items``; the Persona Consistency rubric is always there
    (contradictions are judged on it)."""
    if config.from_run is not None:
        source = items_from_run(config.from_run, per_task=config.per_task, seed=config.seed)
    else:
        source = items_from_file(config.items or "", config.rubric_files)
    source.rubrics.setdefault(CONTRADICTION_CRITERION, load_rubric(CONTRADICTION_CRITERION))
    return source


# --- the run --------------------------------------------------------------------------------------
async def run(
    config: JudgeCheckConfig,
    run_dir: str | Path,
    *,
    settings: ModelSettings | None = None,
    judge_objects: list[Judge] | None = None,
    on_progress: ProgressHandler | None = None,
) -> JudgeCheckSummary:
    """Builds the variants, has every judge score every original and variant, and writes ``judge_check.json``.

    Args:
        config: the source, judges, generator, variants and thresholds.
        run_dir: the run directory (created if needed; reused to resume: stored variants and verdicts
            are not asked again, stored calls are never sent again).
        settings: endpoint settings shared by the judges and the generator (base URL, API key).
        judge_objects: judge objects (any :class:`~personagraph.judges.base.Judge`), each named among the
            run's judges.
        on_progress: receives a :class:`~personagraph.runs.base.ProgressEvent` per variant and verdict.

    Raises:
        PersonagraphError: bad input (one line naming the flag, file or value).
    """
    source = load_input(config)
    judges = config.judges or source.judges or [DEFAULT_JUDGE]
    generator = config.generator or source.generator or judges[0]
    given = given_by_name(judge_objects or [], judges, "judge_objects", "judges")
    check_judge_names(judges, given)
    if generator in given:
        raise PersonagraphError(
            f"generator: the first judge {generator!r} is a judge object; pass generator= a model spec "
            "(it writes the variants)"
        )
    parse_spec(generator)
    protocols = {spec: ready_protocol(config.judge_protocol, spec) for spec in judges}
    settings = (settings or ModelSettings()).model_copy(
        update={"concurrency": config.concurrency, "seed": config.seed}
    )
    gate = asyncio.Semaphore(config.concurrency)
    with Run(KIND, run_dir, config, on_progress=on_progress, summary_file=SUMMARY_FILE,
             retry_failed=config.retry_failed) as ctx:
        store = ctx.store
        ctx.record(
            prompts={name: load_prompt(name).version for name in PROMPTS}
            | {f"judge {spec}": protocol.version for spec, protocol in protocols.items()}
            | {"contrast_personas": data_hash(CONTRAST_FILE), "variant_text": data_hash(TEXT_FILE)},
            rubrics={key: rubric.version for key, rubric in sorted(source.rubrics.items())},
            check={"judges": judges, "generator": generator},
        )
        for item in source.items:
            store.put(ITEM_KIND, item.key, item, unit=item.criterion)

        common = {"store": store, "meter": ctx.meter, "settings": settings, "temperature": 0.0}
        writer = ModelClient.create(generator, "variant_gen", **common, max_tokens=config.max_variant_tokens)
        todo: list[tuple[CheckItem, VariantKind]] = []
        variants: list[Variant] = []
        for item in source.items:
            for kind in config.variants:
                stored = store.get(VARIANT_KIND, variant_id(item, kind, config.seed))
                variant = Variant.model_validate(stored) if stored is not None else None
                if variant is None or ctx.pending(_failures([variant], [], generator)):
                    todo.append((item, kind))  # a failed one's reply, if any, comes from the response cache
                else:
                    variants.append(variant)
        ctx.expect("variants", len(todo) + len(variants), reused=len(variants))

        async def build(item: CheckItem, kind: VariantKind) -> Variant:
            async with gate:
                variant = await build_variant(
                    kind, item, others=source.personas, generator=writer, seed=config.seed
                )
            store.put(VARIANT_KIND, variant.id, variant, unit=kind)
            ctx.advance("variants")
            return variant

        variants += await asyncio.gather(*(build(item, kind) for item, kind in todo))

        by_key = {item.key: item for item in source.items}
        judgements: dict[str, Judgement] = {}
        for variant in variants:
            if variant.status == "ok":
                for judgement in (
                    original_judgement(by_key[variant.item_key], variant),
                    variant_judgement(by_key[variant.item_key], variant),
                ):
                    judgements[judgement.key] = judgement
        judge_clients = {
            spec: judge_for(spec, "judge", given=given, **common, max_tokens=config.max_judge_tokens)
            for spec in judges
        }
        verdicts: dict[tuple[str, str], CheckVerdict] = {}
        asks: list[tuple[Judgement, str, str]] = []
        for judgement in sorted(judgements.values(), key=lambda j: j.key):
            for spec in judges:
                vid = verdict_id(judgement, spec, source.rubrics[judgement.criterion], protocols[spec])
                stored = store.get(VERDICT_KIND, vid)
                verdict = CheckVerdict.model_validate(stored) if stored is not None else None
                if verdict is None or ctx.pending(_failures([], [verdict], generator)):
                    asks.append((judgement, spec, vid))
                else:
                    verdicts[(judgement.key, spec)] = verdict
        ctx.expect(STAGE_VERDICTS, len(asks) + len(verdicts), reused=len(verdicts))

        async def judge(judgement: Judgement, spec: str, vid: str) -> None:
            async with gate:
                scored = await score_response(
                    judge_clients[spec],
                    source.rubrics[judgement.criterion],
                    persona=judgement.persona,
                    question=judgement.question,
                    response=judgement.response,
                    protocol=protocols[spec],
                )
            verdict = CheckVerdict(
                id=vid,
                judgement_key=judgement.key,
                judge=spec,
                criterion=judgement.criterion,
                **scored.verdict_fields(),
            )
            store.put(VERDICT_KIND, vid, verdict, unit=spec)
            verdicts[(judgement.key, spec)] = verdict
            ctx.advance(STAGE_VERDICTS)

        await asyncio.gather(*(judge(*ask) for ask in asks))
        results = judge_results(
            source.items,
            variants,
            verdicts,
            judges,
            source.rubrics,
            thresholds=config.thresholds,
            seed=config.seed,
            n_resamples=config.n_resamples,
        )
        counts = {
            kind: {
                "built": sum(v.kind == kind and v.status == "ok" for v in variants),
                "failed": sum(v.kind == kind and v.status != "ok" for v in variants),
            }
            for kind in config.variants
        }
        summary = JudgeCheckSummary(
            source=str(config.from_run or config.items),
            judges=judges,
            protocols={spec: protocol.name for spec, protocol in protocols.items()},
            generator=generator,
            n_items=len(source.items),
            skipped=source.skipped,
            variants=counts,
            failed_verdicts=sum(v.status != "ok" for v in verdicts.values()),
            results=results,
            baselines=baseline_results(source.items, variants, seed=config.seed,
                                       n_resamples=config.n_resamples),
            failures=_failures(variants, list(verdicts.values()), generator),
        )
        return ctx.finish(summary)


run_sync = synchronous(run)


def _failures(variants: list[Variant], verdicts: list[CheckVerdict], generator: str) -> list[FailedItem]:
    """The failed variants (written by ``generator``) and verdicts, as the outcome's failed items."""
    failed = [
        FailedItem(stage="variants", item=v.id, model=generator, reason=v.error)
        for v in variants
        if v.status != "ok"
    ]
    return failed + [
        FailedItem(stage="verdicts", item=v.id, model=v.judge, reason=v.error)
        for v in verdicts
        if v.status != "ok"
    ]
