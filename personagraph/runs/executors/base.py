"""What every executor shares: the job, the per-process evaluation context, and one persona unit."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from personagraph.agents import Agent, PersonaAgent
from personagraph.agents.cached import CachedAgent
from personagraph.graphs.persona_eval import QUESTION_BATCH, EvalContext
from personagraph.judges.base import PluginJudge
from personagraph.models import Meter, ModelClient, ModelSettings
from personagraph.runs.base import FailedItem
from personagraph.runs.plugins import Plugins, is_plugin_path, load_plugins
from personagraph.schemas import Persona
from personagraph.store import RunStore

if TYPE_CHECKING:  # the config type only: runs/eval.py imports the executors
    from personagraph.runs.eval import EvalConfig

UNIT_DONE = "unit_done"  # record kind: a persona unit of one config finished with every item done
UNIT_FAILED = "unit_failed"  # record kind: a unit's graph reached the end with failed items (attempts, failed)


@dataclass
class EvalJob:
    """An evaluation as an executor sees it. ``settings`` already carry the run's concurrency and seed.

    ``plugins`` are plug-in agents by path, loaded by whichever process runs the units; ``agents`` are
    agent objects given directly, which only the local executor can use.
    """

    config: EvalConfig
    run_dir: Path
    settings: ModelSettings
    agents: list[Agent] | None = None
    plugins: Plugins = field(default_factory=Plugins)
    on_item: Callable[[str], None] = field(default=lambda stage: None)


class Executor(Protocol):
    """Runs every unfinished persona unit of ``job``, writing to ``store`` and counting in ``meter``."""

    name: str

    async def run(self, job: EvalJob, store: RunStore, meter: Meter) -> None: ...


def unit_id(persona: Persona, config: EvalConfig) -> str:
    """A persona unit of a config: also its checkpoint thread id."""
    return f"{persona.id}-{config.fingerprint()}"


def build_context(
    config: EvalConfig,
    settings: ModelSettings,
    store: Any,
    meter: Meter,
    agents: list[Agent] | None = None,
    on_item: Callable[[str], None] | None = None,
    plugins: Plugins | None = None,
) -> EvalContext:
    """The graph's context for one process: role clients over ``store`` (a RunStore or a proxy of one).

    Agents under test are ``plugins`` (loaded here), ``agents`` objects, and a PersonaAgent for every
    other name in ``config.models``. Judges are model clients, or plug-in judges for ``module:attr`` names.
    """
    given = [
        CachedAgent(agent, store, meter)
        for agent in [*(plugins.agents() if plugins else []), *(agents or [])]
    ]
    named = {agent.name for agent in given}
    agents = [
        PersonaAgent(
            ModelClient.create(
                spec,
                "persona",
                store=store,
                meter=meter,
                settings=settings,
                temperature=config.persona_temperature,
                max_tokens=config.max_answer_tokens,
            )
        )
        for spec in config.models
        if spec not in named
    ] + given
    generator = config.generator or config.judges[0]

    def client(spec: str, role: str, **overrides: Any) -> ModelClient:
        return ModelClient.create(spec, role, store=store, meter=meter, settings=settings, **overrides)

    return EvalContext(
        store=store,
        agents=agents,
        judges=[
            PluginJudge(load_plugins([spec], plugins.sys_path if plugins else ())[0])
            if is_plugin_path(spec)
            else client(spec, "judge", temperature=0.0, max_tokens=200)
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


def unit_failures(store: Any, persona: Persona, config: EvalConfig) -> list[FailedItem]:
    """The failed items of one persona unit, from its records (a retried item's row is replaced, so a
    recovered item is no longer listed): selection, question batches, exemplars, answers, verdicts."""
    pid = persona.id
    generator = config.generator or config.judges[0]
    failed = [FailedItem(stage=e.get("stage", "executor"), item=pid, reason=_reason(e))
              for e in store.records("error", unit=pid)]
    if config.benchmark is None:
        selection = store.get("selection", pid)
        if selection is not None and selection["status"] != "ok":
            failed.append(FailedItem(stage="select", item=pid, model=generator, reason=_reason(selection)))
        failed += [FailedItem(stage="questions", item=f"{pid}/{b['task']}", model=generator, reason=_reason(b))
                   for b in store.records(QUESTION_BATCH, unit=pid) if b["status"] != "ok"]
    questions = {q["id"] for q in store.records("question", unit=pid)}
    failed += [FailedItem(stage="exemplars", item=e["question_id"], model=generator, reason=_reason(e))
               for e in store.records("exemplars", unit=pid) if e["question_id"] in questions and e["status"] != "ok"]
    answers = [a for a in store.records("answer", unit=pid)
               if a["question_id"] in questions and a["model"] in config.models]
    failed += [FailedItem(stage="answers", item=a["id"], model=a["model"], reason=_reason(a))
               for a in answers if a["status"] != "ok"]
    answer_ids = {a["id"] for a in answers}
    failed += [FailedItem(stage="verdicts", item=v["id"], model=v["judge"], reason=_reason(v))
               for v in store.records("verdict", unit=pid)
               if v["answer_id"] in answer_ids and v["judge"] in config.judges and v["status"] != "ok"]
    return failed


def unit_to_run(store: Any, persona: Persona, config: EvalConfig) -> bool:
    """Whether a unit has work: never finished, or finished with failed items that are to be retried."""
    uid = unit_id(persona, config)
    if store.get(UNIT_DONE, uid) is not None:
        return False
    return config.retry_failed or store.get(UNIT_FAILED, uid) is None


async def run_unit(
    graph: Any, context: EvalContext, persona: Persona, config: EvalConfig, *, checkpointed: bool
) -> None:
    """Runs (or finishes, or retries) one persona's graph; every finished call and item is already in the
    store, so a unit cut short restarts cheaply: its finished calls are answered from the response cache.

    A unit whose graph ended with failed items is not done: it is recorded as ``unit_failed``, and the
    next run (``config.retry_failed``) runs its graph again on a fresh checkpoint thread — the response
    cache answers every call that succeeded, so only the failed (and never-made) calls are sent.
    """
    uid = unit_id(persona, config)
    if not unit_to_run(context.store, persona, config):
        return
    previous = context.store.get(UNIT_FAILED, uid)
    attempt = previous["attempts"] if previous else 0
    if checkpointed:
        thread = {"configurable": {"thread_id": uid if attempt == 0 else f"{uid}-retry{attempt}"}}
        snapshot = await graph.aget_state(thread)
        if not (snapshot.values and not snapshot.next):
            # Checkpoints are written when the graph exits: the response cache is what makes a restart
            # cheap, and per-step checkpoints cost more than they save (measured: seconds of fsyncs).
            state = None if snapshot.next else initial_state(persona, config)
            await graph.ainvoke(state, thread, context=context, durability="exit")
    else:
        await graph.ainvoke(initial_state(persona, config), context=context)
    record = {"persona_id": persona.id, "fingerprint": config.fingerprint(), "attempts": attempt + 1}
    failed = unit_failures(context.store, persona, config)
    if failed:
        context.store.put(UNIT_FAILED, uid, record | {"failed": len(failed)}, unit=persona.id)
    else:
        context.store.put(UNIT_DONE, uid, record, unit=persona.id)
