"""What every executor shares: the job, the per-process evaluation context, and one persona unit."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from personagraph.models import Meter, ModelClient, ModelSettings

if TYPE_CHECKING:
    from personagraph.agents import Agent
    from personagraph.evaluate import RunConfig
    from personagraph.graphs.persona_eval import EvalContext
    from personagraph.schemas import Persona
    from personagraph.store import RunStore

UNIT_DONE = "unit_done"  # record kind: a persona unit of one config finished (its graph reached the end)

_loaded: dict[str, tuple[Any, Agent]] = {}  # path → (its module, the agent)


def load_plugins(paths: Iterable[str], sys_path: Iterable[str] = ()) -> list[Agent]:
    """The plug-in agents at ``paths`` (``module:attr``), each loaded once per process.

    Cached because a Ray worker runs many persona units and a plug-in may build a client or compile a
    graph; an entry is reused while its module is still the one in ``sys.modules``. ``sys_path``
    directories that exist here and are not yet on ``sys.path`` go first, so a worker finds a module
    where the driver found it.

    Raises:
        PersonagraphError: the one-line error of :func:`~personagraph.agents.plugin.load_agent`.
    """
    from personagraph.agents.plugin import load_agent

    for entry in reversed(list(sys_path)):
        if entry not in sys.path and os.path.isdir(entry):
            sys.path.insert(0, entry)
    agents = []
    for path in dict.fromkeys(p.strip() for p in paths):
        module, agent = _loaded.get(path, (None, None))
        if agent is None or module is not sys.modules.get(_module_name(path)):
            agent = load_agent(path)
            _loaded[path] = (sys.modules.get(_module_name(path)), agent)
        agents.append(agent)
    return agents


def _module_name(path: str) -> str:
    return path.partition(":")[0]


def _import_root(path: str) -> str | None:
    """The ``sys.path`` directory this process imported the module of ``path`` from, if it is a file."""
    module_name = _module_name(path)
    file = getattr(sys.modules.get(module_name), "__file__", None)
    if not file:
        return None
    depth = module_name.count(".") + (1 if Path(file).stem == "__init__" else 0)
    return str(Path(file).parents[depth])


@dataclass(frozen=True)
class Plugins:
    """Plug-in agents as ``module:attr`` paths: what crosses to worker processes instead of the agents.

    Agent objects may not pickle (a compiled graph, a client, a closure), so every process that runs
    persona units loads the paths itself (:func:`load_plugins`); the names, which are the paths, are
    the same everywhere. ``sys_path`` holds the directories the driver imported the modules from.
    """

    paths: tuple[str, ...] = ()
    sys_path: tuple[str, ...] = ()

    @classmethod
    def from_paths(cls, paths: Iterable[str]) -> tuple[Plugins, list[Agent]]:
        """Loads ``paths`` in this process (a bad path fails here, before any unit runs).

        Returns:
            The plug-ins to ship, with where their modules came from, and the loaded agents.
        """
        agents = load_plugins(paths)
        names = tuple(agent.name for agent in agents)
        roots = (_import_root(name) for name in names)
        return cls(names, tuple(dict.fromkeys(r for r in roots if r))), agents

    def agents(self) -> list[Agent]:
        """The agents, loaded in this process (once per process)."""
        return load_plugins(self.paths, self.sys_path)


@dataclass
class EvalJob:
    """An evaluation as an executor sees it. ``settings`` already carry the run's concurrency and seed.

    ``plugins`` are plug-in agents by path, loaded by whichever process runs the units; ``agents`` are
    agent objects given directly, which only the local executor can use.
    """

    config: RunConfig
    run_dir: Path
    settings: ModelSettings
    agents: list[Agent] | None = None
    plugins: Plugins = field(default_factory=Plugins)
    on_item: Callable[[str], None] = field(default=lambda stage: None)


class Executor(Protocol):
    """Runs every unfinished persona unit of ``job``, writing to ``store`` and counting in ``meter``."""

    name: str

    async def run(self, job: EvalJob, store: RunStore, meter: Meter) -> None: ...


def unit_id(persona: Persona, config: RunConfig) -> str:
    """A persona unit of a config: also its checkpoint thread id."""
    return f"{persona.id}-{config.fingerprint()}"


def build_context(
    config: RunConfig,
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
    from personagraph.agents import PersonaAgent
    from personagraph.agents.cached import CachedAgent
    from personagraph.graphs.persona_eval import EvalContext

    given = [CachedAgent(agent, store, meter)
             for agent in [*(plugins.agents() if plugins else []), *(agents or [])]]
    named = {agent.name for agent in given}
    agents = [
        PersonaAgent(ModelClient.create(spec, "persona", store=store, meter=meter, settings=settings,
                                        temperature=config.persona_temperature,
                                        max_tokens=config.max_answer_tokens))
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
        question_gen=client(generator, "question_gen", temperature=0.7,
                            max_tokens=96 * config.questions_per_task + 64),
        exemplar_gen=client(generator, "exemplar_gen", temperature=0.7, max_tokens=400),
        environments=config.environments,
        shortlist=config.shortlist,
        questions_per_task=config.questions_per_task,
        on_item=on_item or (lambda stage: None),
    )


def initial_state(persona: Persona, config: RunConfig) -> dict[str, Any]:
    return {"persona": persona.description, "persona_id": persona.id,
            "benchmark": (config.benchmark or {}).get(persona.description)}


async def run_unit(graph: Any, context: EvalContext, persona: Persona, config: RunConfig, *,
                   checkpointed: bool) -> None:
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
    context.store.put(UNIT_DONE, uid, {"persona_id": persona.id, "fingerprint": config.fingerprint()},
                      unit=persona.id)
