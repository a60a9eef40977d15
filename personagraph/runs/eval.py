"""The ``eval`` run: the PersonaGym evaluation of many personas × models, concurrent and resumable.

Each persona runs through the persona_eval graph with its own checkpoint thread (on an executor: this
process, or Ray tasks); every LLM call goes through the run store's response cache, so running the same
config on the same run directory again sends no finished call twice. ``summary.json`` is computed from
the store only (:func:`build_summary`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from personagraph.agents import Agent
from personagraph.agents.controls import contrast_persona, control_names, control_standing
from personagraph.environments import load_tasks
from personagraph.errors import PersonagraphError
from personagraph.graphs.persona_eval import QUESTION_BATCH, Scoring
from personagraph.judges.base import Judge
from personagraph.judges.cards import validity_lines
from personagraph.judges.judge import ready_protocol
from personagraph.judges.protocols import reads_exemplars
from personagraph.judges.scoring import score_items, summarize_scores, used_score_kind
from personagraph.models import ModelSettings, parse_spec
from personagraph.models.engine import start_engines
from personagraph.models.settings import MAX_CONCURRENCY
from personagraph.models.spec import DEFAULT_JUDGE, DEFAULT_MODEL
from personagraph.prompts import load_prompt
from personagraph.resources import data_hash
from personagraph.runs import judge_check
from personagraph.runs.base import FailedItem, ProgressHandler, Run, Summary, SummaryTable, synchronous
from personagraph.runs.executors import EvalJob, get_executor
from personagraph.runs.executors.base import StoredUnits, UnitOutcome
from personagraph.runs.plugins import Plugins, check_judge_names, given_by_name, is_plugin_path
from personagraph.schemas import TASK_NAMES, Answer, Persona, Seed, Verdict
from personagraph.store import RunStore

KIND = "eval"
# ``quick=True``: a small run (3 environments from a shortlist of 20, 1 question per task, brief answers of
# at most 128 tokens, the first judge). The selector call stays (without it the run was not faster), and the
# answer cap is the run's critical path on 2 cores: each answer's verdict starts only after it; asked for
# two or three sentences, the answers end before the cap instead of being cut (docs/benchmarks.md#quick-run).
QUICK = {"environments": 3, "questions_per_task": 1, "shortlist": 20, "max_answer_tokens": 128,
         "brief_answers": True}
PROMPTS = ("persona", "select_environments", "generate_questions", "exemplars", "judge")
# fields added after runs existed, that add work: left out of the fingerprint at these defaults
ADDED_WORK: dict[str, Any] = {"controls": False, "samples": 1, "brief_answers": False}
STAGES = ("select", "questions", "answers", "exemplars", "verdicts")  # the graph's items, in order


class EvalConfig(BaseModel):
    """Everything that defines an evaluation run (recorded in the run directory, without secrets).

    ``personas`` accepts plain strings. ``models`` holds model specs and plug-in agents' names
    (``module:attr`` paths, or the names of agent objects passed to :func:`run`); ``judges`` holds model
    specs and plug-in judges' ``module:attr`` paths (see ``judges/base.py``).
    """

    model_config = ConfigDict(allow_inf_nan=False)  # NaN passes every bound check: refused as not finite

    personas: list[Persona] = Field(min_length=1)
    benchmark: dict[str, dict[str, list[str]]] | None = None  # persona description → task → questions
    models: list[str] = Field(default_factory=lambda: [DEFAULT_MODEL])
    judges: list[str] = Field(default_factory=lambda: [DEFAULT_JUDGE])
    generator: str | None = None  # env_selector, question_gen and exemplar_gen; default: first judge
    environments: int = Field(5, ge=1, le=50)
    shortlist: int = Field(0, ge=0, le=1000)  # selector shown the N nearest (0: all; ≤ environments: none)
    questions_per_task: int = Field(2, ge=1, le=50)
    concurrency: int = Field(8, ge=1, le=MAX_CONCURRENCY)
    seed: Seed = 0
    allow_self_judging: bool = False
    persona_temperature: float = Field(0.7, ge=0, le=2)
    max_answer_tokens: int = Field(256, ge=16, le=8192)
    brief_answers: bool = False  # model agents are asked for two or three sentences (prompts/persona.yaml)
    quick: bool = False  # the QUICK preset for every field above that is not given
    retry_failed: bool = True  # a resumed run retries the failed items (False keeps them failed)
    retry_permanent: bool = False  # ... and the permanent ones too: their stored replies are asked again
    non_answers: Literal["minimum", "exclude"] = "minimum"  # failed/empty answers score the rubric minimum
    judge_check: int = Field(0, ge=0, le=1000)  # then judge-check N answers per task (in RUN_DIR/judge-check)
    judge_protocol: str | None = None  # how judges are asked (judges/protocols.py); None: each judge's default
    score_kind: Literal["expected", "integer"] = "expected"  # probability-weighted verdict scores, where all have one
    controls: bool = False  # also answer with control arms (agents/controls.py) and report the judges' standing
    samples: int = Field(1, ge=1, le=100)  # answers per question and agent, each with its own seed
    pass_threshold: float = Field(4, ge=1, le=5)  # pass^k: the share of questions whose every sample scores ≥ this

    @field_validator("personas", mode="before")
    @classmethod
    def _plain_strings(cls, value: Any) -> Any:
        if isinstance(value, str | Persona):
            value = [value]
        return (
            [Persona(description=p) if isinstance(p, str) else p for p in value]
            if isinstance(value, list | tuple)
            else value
        )

    @field_validator("models", "judges")
    @classmethod
    def _non_empty(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError("at least one is needed")
        return list(dict.fromkeys(value))

    @model_validator(mode="after")
    def _quick_preset(self) -> EvalConfig:
        if self.quick:
            for name, value in QUICK.items():
                if name not in self.model_fields_set:
                    setattr(self, name, value)
            self.judges = self.judges[:1]
        return self

    def fingerprint(self) -> str:
        """Identifies the work (not the concurrency): a checkpoint thread per persona and config."""
        data = self.model_dump(exclude={"concurrency", "personas", "benchmark", "quick", "retry_failed", "non_answers",
                                        "retry_permanent",
                                        "judge_check", "score_kind", "pass_threshold"})
        for name, default in ADDED_WORK.items():  # at their defaults, runs made before them keep their units
            if name in data and data[name] == default:
                del data[name]
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:10]

    def stage_totals(self) -> dict[str, int]:
        """How many items each stage of the graph finishes for this config (the progress totals)."""
        n_tasks = len(load_tasks())
        if self.benchmark is not None:
            questions = sum(
                len(qs) for p in self.personas for qs in self.benchmark.get(p.description, {}).values()
            )
        else:
            questions = len(self.personas) * n_tasks * self.questions_per_task
        generated = 0 if self.benchmark is not None else len(self.personas)
        answering = len(self.models) * self.samples + len(self.answering()) - len(self.models)
        return {
            "select": generated,
            "questions": generated * n_tasks,
            "answers": questions * answering,
            "exemplars": questions if self.reads_exemplars() else 0,
            "verdicts": questions * answering * len(self.judges),
        }

    def scoring(self) -> Scoring:
        """How this run's scores are computed (the same in ``summary.json`` and the graph's final state)."""
        return Scoring(judges=self.judges, seed=self.seed, score_kind=self.score_kind,
                       non_answers=self.non_answers, samples=self.samples, pass_threshold=self.pass_threshold)

    def answering(self) -> list[str]:
        """Every name that answers the questions: the models under test (``samples`` answers per question
        each), then their control arms (one answer per question each)."""
        return [*self.models, *(control_names(self.models) if self.controls else [])]

    def reads_exemplars(self) -> bool:
        """Whether the run writes exemplars: only when one of its judges' protocols reads them."""
        return reads_exemplars(self.judge_protocol, self.judges)


class EvalSummary(Summary):
    """``summary.json`` of an eval run: scores per model and task, judge agreement, finished personas;
    with ``judge_check`` set, also ``judge_check`` (the run's judge-check summary: judge validity)."""

    models: dict[str, Any] = Field(default_factory=dict)
    failed_verdicts: int = 0
    verdicts: int = 0
    judge_agreement: dict[str, Any] = Field(default_factory=dict)
    per_judge_mean: dict[str, float | None] = Field(default_factory=dict)
    personas: int = 0
    personas_finished: int = 0
    environments_unknown_dropped: int = 0
    shortfalls: list[dict[str, Any]] = Field(default_factory=list)  # fewer environments/questions than asked
    tokens: list[dict[str, Any]] = Field(default_factory=list)
    executor: str = "local"
    # with ``controls``: the control arms' scores (``arms``, shaped like ``models``), each model's PersonaScore
    # minus each arm's with its paired CI (``standing``), and whether the instrument is ``flagged`` (``flags``)
    controls: dict[str, Any] = Field(default_factory=dict)
    # answers the store holds for samples past ``samples`` (a run with more ``--samples`` wrote them): left out
    # of every score, kept for a run that asks for them
    answers_not_asked: int = 0
    # per judge, one line: how its scores agreed with people (its validity card), or how to measure it
    judge_validity: dict[str, str] = Field(default_factory=dict)

    def table(self) -> SummaryTable:
        """The PersonaScore table (task × model, the PersonaScore with its 95% CI, refusals), as ``eval``
        prints it: what a notebook shows for the summary."""
        def score(value: Any) -> str:
            return "—" if value is None else f"{value:.2f}"

        results = list(self.models.values())
        rows = [[task, *(score(r.get("tasks", {}).get(task, {}).get("mean")) for r in results)]
                for task in TASK_NAMES]
        rows += [
            ["PersonaScore", *("incomplete" if r.get("incomplete") else score(r.get("persona_score"))
                               for r in results)],
            ["95% CI", *(f"{ci[0]:.2f}–{ci[1]:.2f}" if (ci := r.get("ci")) else "—" for r in results)],
            ["refusal rate", *("—" if r.get("refusal_rate") is None else f"{r['refusal_rate']:.0%}"
                               for r in results)],
        ]
        return SummaryTable(f"PersonaScore (1–5) · {self.run_dir}", ["", *self.models], rows)


def check_judges(config: EvalConfig) -> None:
    """Refuses a judge that is also an agent under test, unless self-judging is allowed."""
    if config.allow_self_judging:
        return
    for judge in config.judges:
        if judge in config.models:
            raise PersonagraphError(
                f"judge {judge} is also the model under test; choose another --judge or pass "
                "--allow-self-judging"
            )


async def run(
    config: EvalConfig,
    run_dir: str | Path,
    *,
    settings: ModelSettings | None = None,
    agents: list[Agent] | None = None,
    judge_objects: list[Judge] | None = None,
    on_progress: ProgressHandler | None = None,
    executor: str = "local",
    ray_address: str | None = None,
) -> EvalSummary:
    """Runs (or resumes) an evaluation and returns the summary also written to ``summary.json``.

    Args:
        config: what to evaluate. Names in ``config.models`` are model specs (a PersonaAgent over the
            run store, so its calls are cached), plug-in paths (``module:attr``, loaded here and by every
            process that runs units) or the names of ``agents``.
        run_dir: the run directory (created if needed; reused to resume).
        settings: endpoint settings shared by the roles (base URL, API key).
        agents: agent objects under test (``local`` executor only, as objects need not pickle); each
            one's ``name`` must be in ``config.models``.
        judge_objects: judge objects (any :class:`~personagraph.judges.base.Judge`; ``local`` executor
            only); each one's ``name`` must be in ``config.judges``.
        on_progress: receives a :class:`~personagraph.runs.base.ProgressEvent` per finished item.
        executor: ``local`` (this process's event loop) or ``ray`` (persona units as Ray tasks).
        ray_address: the Ray cluster to join (default: a running one, or start one on this machine).

    Raises:
        PersonagraphError: bad config (one line naming the field or value).
    """
    runner = get_executor(executor, address=ray_address)
    settings = (settings or ModelSettings()).model_copy(
        update={"concurrency": config.concurrency, "seed": config.seed,
                "retry_permanent": config.retry_permanent}
    )
    objects = list(agents or [])
    named = set(given_by_name(objects, config.models, "agents", "models"))
    given_judges = given_by_name(judge_objects or [], config.judges, "judge_objects", "judges")
    plugins, _ = Plugins.from_paths(m for m in config.models if m not in named and is_plugin_path(m))
    check_judge_names(config.judges, given_judges)  # a bad plug-in path or spec fails here
    generator = config.generator or config.judges[0]
    if generator in given_judges:
        raise PersonagraphError(
            f"generator: the first judge {config.judges[0]!r} is a judge object; pass generator= a model spec "
            "(it writes the environments, questions and exemplars)"
        )
    for spec in [*config.models, generator]:
        if spec not in named and spec not in plugins.paths and spec not in config.judges:
            parse_spec(spec)
    for spec in config.judges:
        ready_protocol(config.judge_protocol, spec)  # an unknown name: one line before anything runs
    check_judges(config)
    with Run(KIND, run_dir, config, exclude={"benchmark"}, on_progress=on_progress, write_behind=True,
             retry_failed=config.retry_failed, retry_permanent=config.retry_permanent) as run:
        run.record(
            prompts={name: load_prompt(name).version for name in PROMPTS}
            | {"pool": data_hash("environments/pool.yaml"), "tasks": data_hash("environments/tasks.yaml")}
        )
        outcomes = StoredUnits.read(run.store).outcomes(config.personas, config)
        finished = [p for p, o in zip(config.personas, outcomes, strict=True)  # units that will not run again
                    if not o.to_run(config.retry_failed, config.retry_permanent)]
        reused = config.model_copy(update={"personas": finished}).stage_totals()
        for stage, total in config.stage_totals().items():
            if total:
                run.expect(stage, total, reused=reused[stage])
        job = EvalJob(
            config=config,
            run_dir=Path(run_dir),
            settings=settings,
            outcomes={p.id: o for p, o in zip(config.personas, outcomes, strict=True)},
            agents=objects or None,
            judges=list(given_judges.values()) or None,
            plugins=plugins,
            on_item=run.advance,
        )
        run.retrying(_failures_to_retry(outcomes, config))
        if runner.name == "local":  # Ray's workers start their own
            start_engines([generator, *config.judges, *config.models])
        await runner.run(job, run.store, run.meter)
        summary = build_summary(run.store, config)
        summary.executor = runner.name
        if config.judge_check:
            run.store.flush()  # the check reads this run's answers from the store
            check = judge_check.JudgeCheckConfig(from_run=str(run_dir), per_task=config.judge_check,
                                                 seed=config.seed, concurrency=config.concurrency,
                                                 retry_failed=config.retry_failed,
                                                 judge_protocol=config.judge_protocol)
            found = await judge_check.run(check, Path(run_dir) / judge_check.EVAL_SUBDIR, settings=settings,
                                          judge_objects=judge_objects, on_progress=on_progress)
            summary.judge_check = found.model_dump(mode="json")  # type: ignore[attr-defined]
            _add_outcome(summary, found, "judge-check")
        return run.finish(summary)


run_sync = synchronous(run)


def _add_outcome(summary: Summary, part: Summary, name: str) -> None:
    """Counts a part of the run (its judge check) in the run's own outcome: its failed items (stage
    ``name:stage``), incomplete, retried and recovered items, so the exit code covers both."""
    summary.failures += [f.model_copy(update={"stage": f"{name}:{f.stage}"}) for f in part.failures]
    summary.incomplete += part.incomplete
    summary.retried += part.retried
    summary.recovered += part.recovered


def _failures_to_retry(outcomes: list[UnitOutcome], config: EvalConfig) -> list[FailedItem]:
    """The failed items this run will retry: those of units that ended with failures (if retrying)."""
    if not config.retry_failed:
        return []
    return [f for o in outcomes if o.end is not None for f in o.failures]


def _shortfalls(stored: StoredUnits, persona_ids: set[str]) -> list[dict[str, Any]]:
    """Selections and question lists that stayed short of the requested count after their top-ups."""
    rows = [{"stage": "select", "item": s["persona_id"], "requested": s["requested"],
             "got": s["requested"] - s["shortfall"]}
            for s in stored.records("selection") if s["persona_id"] in persona_ids and s.get("shortfall")]
    rows += [{"stage": "questions", "item": f"{b['persona_id']}/{b['task']}", "requested": b["requested"],
              "got": b["requested"] - b["shortfall"]}
             for b in stored.records(QUESTION_BATCH)
             if b["persona_id"] in persona_ids and b["status"] == "ok" and b["shortfall"]]
    return rows


def _controls(answers: list[Answer], verdicts: list[Verdict], config: EvalConfig, tasks: Any) -> dict[str, Any]:
    """The control arms' scores and the judges' standing against them (``EvalSummary.controls``): item
    scores of the agents and the arms alike (the same score kind and non-answer rule), then
    :func:`~personagraph.agents.controls.control_standing`."""
    kind = used_score_kind(verdicts, config.score_kind)  # one kind for agents and arms: they are compared
    arms = [a for a in answers if a.model not in config.models]
    arm_verdicts = [v for v in verdicts if v.answer_id in {a.id for a in arms}]
    scored = summarize_scores(arms, arm_verdicts, config.judges, seed=config.seed, non_answers=config.non_answers,
                              tasks=tasks, score_kind=kind)
    items = score_items(answers, verdicts, kind, config.non_answers)
    failed = {a.id for a in answers if a.status != "ok"}
    for arm, result in scored["models"].items():  # an arm with failed answers scores fewer than were asked
        result["incomplete"] = bool(result.get("incomplete") or any(a.model == arm for a in arms if a.id in failed))
    return {"arms": scored["models"],
            "contrast_personas": {p.description: contrast_persona(p.description) for p in config.personas},
            **control_standing(items, config.models, seed=config.seed, failed=failed)}


def build_summary(store: RunStore, config: EvalConfig | None = None) -> EvalSummary:
    """The scores of a run, computed from its store (optionally restricted to one config's work).

    Outcome: ``failures`` lists every failed item of the config's personas (stage, item, model, reason);
    ``incomplete`` counts the persona units that did not run to the end (an interrupted run) and the
    records that ended units held but the store lacks now (deleted by hand: the next run redoes them);
    ``personas_finished`` the units whose every item finished and is still there.
    """
    if config is None:
        config = EvalConfig.model_validate(store.get_meta("config"))
    persona_ids = {p.id for p in config.personas}
    # Sorted by id, not by finishing time: the bootstrap draws items by position, so the same items must
    # give the same CI whatever order concurrency (or a resumed run) wrote them in.
    answering = set(config.answering())
    units = StoredUnits.read(store)
    stored = [a for a in map(Answer.model_validate, units.records("answer"))
              if a.persona_id in persona_ids and a.model in answering]
    every_answer = sorted((a for a in stored if a.sample < config.samples), key=lambda a: a.id)
    every_verdict = [Verdict.model_validate(v) for v in units.records("verdict")]
    answering_ids = {a.id for a in every_answer}
    every_verdict = sorted(
        (v for v in every_verdict if v.answer_id in answering_ids and v.judge in config.judges), key=lambda v: v.id
    )
    answers = [a for a in every_answer if a.model in config.models]  # the agents under test
    answer_ids = {a.id for a in answers}
    verdicts = [v for v in every_verdict if v.answer_id in answer_ids]
    selections = [s for s in units.records("selection") if s["persona_id"] in persona_ids]
    tasks = TASK_NAMES  # a static benchmark without all five tasks has no complete PersonaScore either
    outcomes = units.outcomes(config.personas, config)
    summary = EvalSummary(
        **summarize_scores(answers, verdicts, tasks=tasks, **asdict(config.scoring())),
        controls=_controls(every_answer, every_verdict, config, tasks) if config.controls else {},
        personas=len(config.personas),
        personas_finished=sum(o.done for o in outcomes),
        environments_unknown_dropped=sum(len(s.get("unknown", [])) for s in selections),
        shortfalls=_shortfalls(units, persona_ids),
        failures=[f for o in outcomes for f in o.failures],
        incomplete=sum(o.end is None for o in outcomes) + sum(len(o.missing) for o in outcomes),
        tokens=store.call_stats(),
        answers_not_asked=len(stored) - len(every_answer),
    )
    mark_unscored(summary, answers, verdicts, config.judges)
    summary.judge_validity = validity_lines(config.judges, config.judge_protocol, list(TASK_NAMES))
    return summary


def mark_unscored(summary: EvalSummary, answers: list[Answer], verdicts: list[Verdict], judges: list[str]) -> None:
    """Says where scores are missing: ``unscored`` counts the answers (of the models under test) that failed
    or lack a verdict of some judge, and a model's PersonaScore is ``incomplete`` whenever any of its items
    is unscored or the run lost items before the answers (a failed selection or question batch, a unit that
    did not end): a score over fewer answers than were asked is never shown as complete."""
    judged = {(v.answer_id, v.judge) for v in verdicts if v.status == "ok"}
    short = summary.incomplete > 0 or any(f.stage not in ("answers", "verdicts") for f in summary.failures)
    for model, scores in summary.models.items():
        unscored = sum(a.status != "ok" or any((a.id, judge) not in judged for judge in judges)
                       for a in answers if a.model == model)
        scores["unscored"] = unscored
        scores["incomplete"] = bool(scores.get("incomplete") or unscored or short)
        summary.unscored += unscored
