"""What every executor shares: the job, the per-process evaluation context, and one persona unit."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from personagraph.agents import Agent, PersonaAgent
from personagraph.agents.cached import CachedAgent
from personagraph.graphs.persona_eval import EvalContext
from personagraph.models import Meter, ModelClient, ModelSettings
from personagraph.runs.plugins import Plugins
from personagraph.schemas import Persona
from personagraph.store import RunStore

if TYPE_CHECKING:  # the config type only: runs/eval.py imports the executors
    from personagraph.runs.eval import EvalConfig

UNIT_DONE = "unit_done"  # record kind: a persona unit of one config finished (its graph reached the end)


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
    other name in ``config.models``.
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
        judges=[client(spec, "judge", temperature=0.0, max_tokens=200) for spec in config.judges],
        env_selector=client(generator, "env_selector", temperature=0.0, max_tokens=120),
        question_gen=client(
            generator, "question_gen", temperature=0.7, max_tokens=96 * config.questions_per_task + 64
        ),
        exemplar_gen=client(generator, "exemplar_gen", temperature=0.7, max_tokens=400),
        environments=config.environments,
        shortlist=config.shortlist,
        questions_per_task=config.questions_per_task,
        on_item=on_item or (lambda stage: None),
    )


def initial_state(persona: Persona, config: EvalConfig) -> dict[str, Any]:
    return {
        "persona": persona.description,
        "persona_id": persona.id,
        "benchmark": (config.benchmark or {}).get(persona.description),
    }


async def run_unit(
    graph: Any, context: EvalContext, persona: Persona, config: EvalConfig, *, checkpointed: bool
) -> None:
    """Runs (or finishes) one persona's graph; every finished call and item is already in the store,
    so a unit cut short restarts cheaply: its finished calls are answered from the response cache."""
    uid = unit_id(persona, config)
    if context.store.get(UNIT_DONE, uid) is not None:
        return
    if checkpointed:
        thread = {"configurable": {"thread_id": uid}}
        snapshot = await graph.aget_state(thread)
        if not (snapshot.values and not snapshot.next):
            # Checkpoints are written when the graph exits: the response cache is what makes a restart
            # cheap, and per-step checkpoints cost more than they save (measured: seconds of fsyncs).
            state = None if snapshot.next else initial_state(persona, config)
            await graph.ainvoke(state, thread, context=context, durability="exit")
    else:
        await graph.ainvoke(initial_state(persona, config), context=context)
    context.store.put(
        UNIT_DONE, uid, {"persona_id": persona.id, "fingerprint": config.fingerprint()}, unit=persona.id
    )
