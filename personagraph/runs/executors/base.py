"""What every executor shares: the job, the per-process evaluation context, and one persona unit."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from personagraph.agents import Agent, PersonaAgent
from personagraph.agents.cached import CachedAgent
from personagraph.agents.controls import control_agents
from personagraph.agents.persona import sample_seed
from personagraph.graphs.persona_eval import QUESTION_BATCH, EvalContext
from personagraph.judges.base import Judge
from personagraph.models import Meter, ModelClient, ModelSettings
from personagraph.runs.base import FailedItem
from personagraph.runs.plugins import Plugins, judge_for
from personagraph.schemas import Persona
from personagraph.store import RunStore

if TYPE_CHECKING:  # the config type only: runs/eval.py imports the executors
    from personagraph.runs.eval import EvalConfig

UNIT_DONE = "unit_done"  # record kind: a persona unit of one config finished with every item done
UNIT_FAILED = "unit_failed"  # record kind: a unit's graph ended with failed items (attempts, failed)


@dataclass
class EvalJob:
    """An evaluation as an executor sees it. ``settings`` already carry the run's concurrency and seed.

    ``plugins`` are plug-in agents by path, loaded by whichever process runs the units; ``agents`` and
    ``judges`` are agent and judge objects given directly, which only the local executor can use.
    """

    config: EvalConfig
    run_dir: Path
    settings: ModelSettings
    outcomes: dict[str, UnitOutcome]  # persona id → where its unit stood when the run started
    agents: list[Agent] | None = None
    judges: list[Judge] | None = None
    plugins: Plugins = field(default_factory=Plugins)
    on_item: Callable[[str], None] = field(default=lambda stage: None)

    def units(self) -> list[Persona]:
        """The personas whose units have work (:meth:`UnitOutcome.to_run`), each once: a persona listed
        twice is one unit."""
        config = self.config
        personas = {p.id: p for p in config.personas}.values()
        return [p for p in personas
                if self.outcomes[p.id].to_run(config.retry_failed, config.retry_permanent)]


class Executor(Protocol):
    """Runs every unfinished persona unit of ``job``, writing to ``store`` and counting in ``meter``."""

    name: str

    async def run(self, job: EvalJob, store: RunStore, meter: Meter) -> None: ...


def unit_id(persona: Persona, config: EvalConfig) -> str:
    """A persona unit of a config: also its checkpoint thread id."""
    return _unit_id(persona.id, config.fingerprint())


def _unit_id(persona_id: str, fingerprint: str) -> str:
    return f"{persona_id}-{fingerprint}"


def build_context(
    config: EvalConfig,
    settings: ModelSettings,
    store: Any,
    meter: Meter,
    agents: list[Agent] | None = None,
    on_item: Callable[[str], None] | None = None,
    plugins: Plugins | None = None,
    judges: list[Judge] | None = None,
    persona_scores: bool = True,
) -> EvalContext:
    """The graph's context for one process: role clients over ``store`` (a RunStore or a proxy of one).

    Agents under test are ``plugins`` (loaded here), ``agents`` objects, and a PersonaAgent for every
    other name in ``config.models``; with ``config.samples`` K > 1, each answers K times (samples 1 .. K-1
    in ``extra_answerers``), and with ``config.controls`` their control arms answer too
    (:mod:`personagraph.agents.controls`). Judges are ``judges`` objects, plug-in judges for ``module:attr``
    names and model clients for the other names (:func:`~personagraph.runs.plugins.judge_for`).
    ``persona_scores``: whether the graph's final state carries the persona's scores (Studio shows them);
    the executors turn it off, as a run's summary is built from its store.
    """
    objects = [*(plugins.agents() if plugins else []), *(agents or [])]
    named = {agent.name for agent in objects}

    def sampled(sample: int) -> list[Agent]:
        """The agents under test answering their ``sample``-th sample: model agents with that sample's seed,
        agent objects asked again (a cache entry per sample)."""
        return [
            PersonaAgent(
                ModelClient.create(
                    spec,
                    "persona",
                    store=store,
                    meter=meter,
                    settings=settings,
                    temperature=config.persona_temperature,
                    max_tokens=config.max_answer_tokens,
                    seed=sample_seed(settings.seed, sample),
                ),
                brief=config.brief_answers,
            )
            for spec in config.models
            if spec not in named
        ] + [CachedAgent(agent, store, meter, sample=sample, max_tokens=config.max_answer_tokens)
             for agent in objects]

    agents = sampled(0)
    extra = [(agent, sample) for sample in range(1, config.samples) for agent in sampled(sample)]
    extra += [(arm, 0) for arm in control_agents(agents)] if config.controls else []
    generator = config.generator or config.judges[0]
    given_judges = {judge.name: judge for judge in judges or []}

    def client(spec: str, role: str, **overrides: Any) -> ModelClient:
        return ModelClient.create(spec, role, store=store, meter=meter, settings=settings, **overrides)

    return EvalContext(
        store=store,
        agents=agents,
        extra_answerers=extra,
        judges=[
            judge_for(spec, "judge", given=given_judges,
                      sys_path=plugins.sys_path if plugins else (), store=store, meter=meter,
                      settings=settings, temperature=0.0, max_tokens=200)
            for spec in config.judges
        ],
        env_selector=client(generator, "env_selector", temperature=0.0, max_tokens=120),
        question_gen=client(
            generator, "question_gen", temperature=0.7, max_tokens=96 * config.questions_per_task + 64
        ),
        exemplar_gen=client(generator, "exemplar_gen", temperature=0.7, max_tokens=400),
        environments=config.environments,
        shortlist=config.shortlist,
        questions_per_task=config.questions_per_task,
        judge_protocol=config.judge_protocol,
        exemplars=config.reads_exemplars(),
        scoring=config.scoring(),
        persona_scores=persona_scores,
        on_item=on_item or (lambda stage: None),
    )


def initial_state(persona: Persona, config: EvalConfig) -> dict[str, Any]:
    return {
        "persona": persona.description,
        "persona_id": persona.id,
        "benchmark": (config.benchmark or {}).get(persona.description),
    }


def _reason(record: dict[str, Any]) -> str | None:
    return record.get("error")  # FailedItem makes it one scrubbed line ("failed" when there is none)


UNIT_RECORDS = {  # the record kinds a persona unit writes → the field that names a row of it within the unit
    "selection": "persona_id", QUESTION_BATCH: "task", "question": "id", "exemplars": "question_id",
    "answer": "id", "verdict": "id", "item_score": "answer_id", "persona_done": "persona_id",
}
UNIT_KINDS = (*UNIT_RECORDS, "error")  # a unit's outcome is read from these: its records, its executor errors
UNIT_ENDS = (UNIT_DONE, UNIT_FAILED)


@dataclass(frozen=True)
class UnitRecords:
    """The records of one persona unit, as the store holds them now: ``present`` names every row of each
    kind in :data:`UNIT_RECORDS`; ``rows`` are those of one config (other configs' answers and verdicts,
    and a benchmark config's selection, left out): what its failures, inventory and summary come from;
    ``errors`` are the unit's executor errors."""

    persona_id: str
    present: dict[str, set[str]]
    rows: dict[str, list[dict[str, Any]]]
    errors: list[dict[str, Any]]

    @classmethod
    def read(cls, store: Any, persona: Persona, config: EvalConfig) -> UnitRecords:
        """One unit's records, read from ``store`` (a query per kind)."""
        return cls.of(persona.id, {kind: store.records(kind, unit=persona.id) for kind in UNIT_KINDS}, config)

    @classmethod
    def of(
        cls, persona_id: str, by_kind: Mapping[str, list[dict[str, Any]]], config: EvalConfig
    ) -> UnitRecords:
        """A unit's records from its rows of each of :data:`UNIT_KINDS` (a kind left out: no rows)."""
        stored = {kind: by_kind.get(kind, []) for kind in UNIT_RECORDS}
        questions = {q["id"] for q in stored["question"]}
        answering = set(config.answering())
        answers = [a for a in stored["answer"]
                   if a["question_id"] in questions and a["model"] in answering
                   and a.get("sample", 0) < config.samples]
        answer_ids = {a["id"] for a in answers}
        rows = stored | {
            "exemplars": [e for e in stored["exemplars"] if e["question_id"] in questions],
            "answer": answers,
            "verdict": [v for v in stored["verdict"]
                        if v["answer_id"] in answer_ids and v["judge"] in config.judges],
            "item_score": [s for s in stored["item_score"] if s["answer_id"] in answer_ids],
        }
        if config.benchmark is not None:
            rows |= {"selection": [], QUESTION_BATCH: []}
        present = {kind: {r[UNIT_RECORDS[kind]] for r in found} for kind, found in stored.items()}
        return cls(persona_id, present, rows, by_kind.get("error", []))

    def inventory(self) -> dict[str, list[str]]:
        """The config's rows by kind, by name: kept with the unit's end record, so that a later read that
        lacks one of them knows a record was lost (deleted by hand, say)."""
        return {kind: sorted(r[UNIT_RECORDS[kind]] for r in rows) for kind, rows in self.rows.items()}

    def missing(self, inventory: dict[str, list[str]]) -> list[str]:
        """The records of an ``inventory`` that the store lacks now ("kind name" each)."""
        return [f"{kind} {name}" for kind, names in inventory.items()
                for name in sorted(set(names) - self.present.get(kind, set()))]

    def failures(self, config: EvalConfig) -> list[FailedItem]:
        """The failed items (a retried item's row is replaced, so a recovered item is no longer listed):
        executor errors, selection, question batches, exemplars, answers, verdicts."""
        pid = self.persona_id
        generator = config.generator or config.judges[0]
        rows = self.rows
        failed = [FailedItem(stage=e.get("stage", "executor"), item=pid, reason=_reason(e))
                  for e in self.errors]
        failed += [FailedItem(stage="select", item=pid, model=generator, reason=_reason(s))
                   for s in rows["selection"] if s["status"] != "ok"]
        failed += [FailedItem(stage="questions", item=f"{pid}/{b['task']}", model=generator,
                              reason=_reason(b))
                   for b in rows[QUESTION_BATCH] if b["status"] != "ok"]
        failed += [FailedItem(stage="exemplars", item=e["question_id"], model=generator, reason=_reason(e))
                   for e in rows["exemplars"] if e["status"] != "ok"]
        failed += [FailedItem(stage="answers", item=a["id"], model=a["model"], reason=_reason(a))
                   for a in rows["answer"] if a["status"] != "ok"]
        failed += [FailedItem(stage="verdicts", item=v["id"], model=v["judge"], reason=_reason(v))
                   for v in rows["verdict"] if v["status"] != "ok"]
        return failed


@dataclass(frozen=True)
class UnitOutcome:
    """Where one persona unit of one config stands: how its last run ended (``end``: ``UNIT_DONE`` or
    ``UNIT_FAILED`` with its record; None: never ended, e.g. interrupted), its failed items, and the records
    it held when it ended that the store lacks now (``missing``: "kind name" each)."""

    end: tuple[str, dict[str, Any]] | None
    failures: list[FailedItem]
    missing: list[str]

    @classmethod
    def of(cls, end: tuple[str, dict[str, Any]] | None, rows: UnitRecords, config: EvalConfig) -> UnitOutcome:
        """Where a unit stands, from how it ended and its records now."""
        missing = rows.missing(end[1].get("records", {})) if end else []
        return cls(end, rows.failures(config), missing)

    @property
    def done(self) -> bool:
        """Ended with every item done, and every one of its records still there."""
        return self.end is not None and self.end[0] == UNIT_DONE and not self.failures and not self.missing

    @property
    def attempts(self) -> int:
        return self.end[1]["attempts"] if self.end else 0

    def to_run(self, retry_failed: bool, retry_permanent: bool = False) -> bool:
        """Whether the unit has work: never ended; ended with failed items to retry (permanent ones are not:
        ``runs.base.STORED_REPLY_FAILURES``); or ended, and records it held are missing now (redone from the
        response cache: no successful call is sent again). A kept failed unit (``retry_failed=False``) is
        not run even for missing records: its failed calls would be sent again."""
        if self.end is None:
            return True
        if self.failures and not retry_failed:
            return False
        return bool(self.missing) or any(retry_permanent or not f.permanent for f in self.failures)


def _last_end(ends: Iterable[tuple[str, dict[str, Any] | None]]) -> tuple[str, dict[str, Any]] | None:
    """Of a unit's end records (kind, record or None), the one with more attempts; None when there is none."""
    found = [(kind, record) for kind, record in ends if record is not None]
    return max(found, key=lambda e: e[1]["attempts"], default=None)


def unit_end(store: Any, persona: Persona, config: EvalConfig) -> tuple[str, dict[str, Any]] | None:
    """How a unit's last run ended: ``UNIT_DONE`` or ``UNIT_FAILED`` and its record (the one with more
    attempts), or None when it never ended."""
    uid = unit_id(persona, config)
    return _last_end((kind, store.get(kind, uid)) for kind in UNIT_ENDS)


@dataclass(frozen=True)
class StoredUnits:
    """Every unit's records and end records, read in one query per kind (``(unit, id, data)`` rows by kind):
    for what reads all units at once, a run's start and its summary, where a query per unit and kind cost
    seconds at thousands of personas."""

    rows: dict[str, list[tuple[str, str, dict[str, Any]]]]

    @classmethod
    def read(cls, store: RunStore) -> StoredUnits:
        return cls({kind: store.keyed_records(kind) for kind in (*UNIT_KINDS, *UNIT_ENDS)})

    def records(self, kind: str) -> list[dict[str, Any]]:
        """Every row of a kind, in insertion order (as ``store.records(kind)``)."""
        return [data for _, _, data in self.rows[kind]]

    def outcomes(self, personas: list[Persona], config: EvalConfig) -> list[UnitOutcome]:
        """Where each persona's unit of ``config`` stands."""
        by_unit: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
        for kind in UNIT_KINDS:
            for unit, _, data in self.rows[kind]:
                by_unit[unit][kind].append(data)
        ends = {kind: {id: data for _, id, data in self.rows[kind]} for kind in UNIT_ENDS}
        fingerprint = config.fingerprint()
        outcomes = []
        for persona in personas:
            uid = _unit_id(persona.id, fingerprint)
            end = _last_end((kind, ends[kind].get(uid)) for kind in UNIT_ENDS)
            if end is None and persona.id not in by_unit:  # nothing stored: a new unit (most of a large run)
                outcomes.append(UnitOutcome(None, [], []))
                continue
            records = UnitRecords.of(persona.id, by_unit[persona.id], config)
            outcomes.append(UnitOutcome.of(end, records, config))
        return outcomes


async def run_unit(
    graph: Any, context: EvalContext, persona: Persona, config: EvalConfig, outcome: UnitOutcome, *,
    checkpointed: bool,
) -> None:
    """Runs (or finishes, or retries) the graph of one persona whose unit has work (:meth:`EvalJob.units`);
    every finished call and item is already in the store, so a unit cut short restarts cheaply: its
    finished calls are answered from the response cache. ``outcome``: where the unit stood when the run
    started (the run reads every unit's at once).

    A unit whose graph ended with failed items is not done: it is recorded as ``unit_failed``, and the
    next run (``config.retry_failed``) runs its graph again on a fresh checkpoint thread — the response
    cache answers every call that succeeded, so only the failed (and never-made) calls are sent. The same
    goes for a unit that lost records it held when it ended (its end record keeps their inventory).
    """
    ended, attempt = outcome.end is not None, outcome.attempts
    if checkpointed:
        uid = unit_id(persona, config)
        thread_id = uid if attempt == 0 else f"{uid}-retry{attempt}"
        thread = {"configurable": {"thread_id": thread_id}}
        snapshot = await graph.aget_state(thread)
        if not ended and snapshot.values and not snapshot.next:
            # A finished graph whose unit has no end record: the store lost what the graph wrote (restored
            # from an older copy, records deleted). Its records are not trusted: the graph runs again, and
            # the response cache answers every call the store still holds.
            await graph.checkpointer.adelete_thread(thread_id)
            snapshot = await graph.aget_state(thread)
        if not (snapshot.values and not snapshot.next):
            # Checkpoints are written when the graph exits: the response cache is what makes a restart
            # cheap, and per-step checkpoints cost more than they save (measured: seconds of fsyncs).
            state = None if snapshot.next else initial_state(persona, config)
            await graph.ainvoke(state, thread, context=context, durability="exit")
    else:
        await graph.ainvoke(initial_state(persona, config), context=context)
    record_unit_end(context.store, persona, config, attempt + 1)


def record_unit_end(store: Any, persona: Persona, config: EvalConfig, attempts: int) -> None:
    """Records how a unit's graph ended: ``unit_done``, or ``unit_failed`` when items failed, with the
    inventory of its records (see :func:`run_unit`)."""
    rows = UnitRecords.read(store, persona, config)
    fingerprint = config.fingerprint()
    record = {"persona_id": persona.id, "fingerprint": fingerprint, "attempts": attempts,
              "records": rows.inventory()}
    failed = rows.failures(config)
    uid = _unit_id(persona.id, fingerprint)
    if failed:
        store.put(UNIT_FAILED, uid, record | {"failed": len(failed)}, unit=persona.id)
    else:
        store.put(UNIT_DONE, uid, record, unit=persona.id)
