"""The graphs as ``langgraph dev`` / LangGraph Studio serve them (``langgraph.json`` points here).

A deployed graph receives its context as plain JSON: the run's ``context`` (or, from older clients, its
``configurable``), coerced into the settings dataclasses below, each field with a default. Studio shows
them as the run's form; a user types a persona into the input and watches the graph run node by node.
Each settings object builds the graph's live context (model clients, agents, run store) once per process
and per distinct settings, so every node of a run — and every later run with the same settings — shares
one run store (the response cache: a repeated question is answered from it).

``run_dir`` empty means a fresh temporary directory per process (an in-memory-like store that is gone
when the server stops); a path keeps the run store there, as ``personagraph view`` reads it: the
PersonaGym graph records each finished persona there as ``personagraph eval`` does, so the directory
shows the same scores as the runs' final states.
"""

from __future__ import annotations

import atexit
import json
import shutil
import tempfile
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from personagraph.agents import PersonaAgent
from personagraph.agents.user_sim import SimulatedUser
from personagraph.errors import PersonagraphError
from personagraph.graphs.memory_dialogue import (
    MemoryDialogueContext,
    MemoryDialogueInput,
    MemoryDialogueOutput,
)
from personagraph.graphs.memory_dialogue import build_graph as memory_dialogue_graph
from personagraph.graphs.persona_eval import EvalContext, EvalInput, EvalOutput
from personagraph.graphs.persona_eval import build_graph as persona_eval_graph
from personagraph.graphs.session import SessionContext, SessionInput, SessionOutput
from personagraph.graphs.session import build_graph as session_graph
from personagraph.judges.session import split_judges
from personagraph.memory.bank import MemoryBank
from personagraph.models import Meter, ModelClient, ModelSettings
from personagraph.runs.eval import DEFAULT_JUDGE, DEFAULT_MODEL, KIND, EvalConfig
from personagraph.runs.executors.base import build_context, record_unit_end, unit_end
from personagraph.runs.simulate import DEFAULT_AGENT, DEFAULT_USER, SimulateConfig
from personagraph.schemas import Persona
from personagraph.store import RunStore

_lock = threading.Lock()
_live: dict[str, Any] = {}  # settings (as JSON) → the live context they built
_stores: list[RunStore] = []
_owners: dict[str, str] = {}  # run directory (resolved) → the settings (as JSON) whose runs it holds
_temporary: list[str] = []


STUDIO_META = "studio"
"""The meta key a Studio server sets in the run directories it writes: ``personagraph view`` says the run is
open in a server (not an interrupted command), and whose settings the directory holds."""


def _store(run_dir: str, settings: Any) -> RunStore:
    """The run store in ``run_dir`` for runs with ``settings`` (a new temporary directory when empty,
    removed at exit).

    Raises:
        SettingsConflict: the directory already holds runs with other settings (of this server, or recorded
            by an earlier one): their numbers would mix, so these settings need a ``run_dir`` of their own.
    """
    if not run_dir:
        run_dir = tempfile.mkdtemp(prefix="personagraph-studio-")
        _temporary.append(run_dir)
    key = str(Path(run_dir).resolve())
    fields = json.dumps(asdict(settings), sort_keys=True)
    held = _owners.get(key)
    if held is not None and held != fields:
        raise _conflict(run_dir, json.loads(held), settings)
    store = RunStore(run_dir)
    recorded = store.get_meta(STUDIO_META)
    if isinstance(recorded, dict) and recorded.get("settings") not in (None, asdict(settings)):
        store.close()
        raise _conflict(run_dir, recorded["settings"], settings)
    store.set_meta(STUDIO_META, {"server": "langgraph dev", "settings": asdict(settings)})
    _owners[key] = fields
    _stores.append(store)
    return store


class SettingsConflict(PersonagraphError, ValueError):
    """Runs with other settings asked for a run directory that holds runs: one line saying what differs and
    what to do (a ValueError too, so that the dev server shows its message, as it hides other errors')."""


def _conflict(run_dir: str, held: dict[str, Any], settings: Any) -> SettingsConflict:
    differ = [f"{name}: {held.get(name)!r} there, {value!r} here" for name, value in asdict(settings).items()
              if name != "run_dir" and held.get(name) != value]
    return SettingsConflict(
        f"run_dir {run_dir}: holds runs with other settings ({'; '.join(differ) or 'another graph'}); their "
        "numbers would mix: give these settings a run_dir of their own (or leave it empty)"
    )


@atexit.register
def _close_stores() -> None:
    for store in _stores:
        store.close()
    for folder in _temporary:
        shutil.rmtree(folder, ignore_errors=True)


def _once(settings: Any, build: Callable[[], Any]) -> Any:
    """``build()`` for the first run with these settings; the same object for every later call."""
    key = f"{type(settings).__name__}:{json.dumps(asdict(settings), sort_keys=True)}"
    with _lock:
        if key not in _live:
            _live[key] = build()
        return _live[key]


@dataclass(frozen=True)
class EvalSettings:
    """A Studio run of the PersonaGym graph. Input: ``{"persona": "..."}``."""

    models: list[str] = field(default_factory=lambda: [DEFAULT_MODEL])
    judges: list[str] = field(default_factory=lambda: [DEFAULT_JUDGE])
    generator: str = ""  # environment selector, question and exemplar writer; empty: the first judge
    environments: int = 5
    shortlist: int = 0
    questions_per_task: int = 2
    run_dir: str = ""

    def config(self) -> EvalConfig:
        """The evaluation config these settings describe (the persona comes with each run's input)."""
        return EvalConfig(
            personas=["(given in each run's input)"],
            models=self.models,
            judges=self.judges,
            generator=self.generator or None,
            environments=self.environments,
            shortlist=self.shortlist,
            questions_per_task=self.questions_per_task,
        )

    def live(self) -> EvalContext:
        def build() -> EvalContext:
            store = _store(self.run_dir, self)
            context = build_context(self.config(), ModelSettings(), store, Meter())
            context.on_persona_done = lambda persona: self._record(store, persona)
            return context

        return _once(self, build)

    def _record(self, store: RunStore, persona: Persona) -> None:
        """Records a finished persona as an ``eval`` run would (its config with every persona run so far,
        and the unit's end), so that ``personagraph view`` and ``report`` read the directory as one."""
        with _lock:
            held = store.get_meta("config")
            known = [Persona.model_validate(p) for p in held["personas"]] if isinstance(held, dict) else []
            personas = list({p.id: p for p in [*known, persona]}.values())
            config = self.config().model_copy(update={"personas": personas})
            store.set_meta("kind", KIND)
            store.set_meta("config", config.model_dump(mode="json", exclude={"benchmark"}))
            end = unit_end(store, persona, config)
            record_unit_end(store, persona, config, (end[1]["attempts"] if end else 0) + 1)


@dataclass(frozen=True)
class SessionSettings:
    """A Studio run of the session graph. Input: ``{"persona": "..."}`` (``max_turns``, ``scenario``,
    ``user_persona`` and ``adversarial`` optional); the agent's own model never judges it."""

    agent: str = DEFAULT_AGENT
    user: str = DEFAULT_USER
    judges: list[str] = field(default_factory=lambda: [DEFAULT_JUDGE])
    run_dir: str = ""

    def live(self) -> SessionContext:
        def build() -> SessionContext:
            defaults = SimulateConfig(persona="(given in each run's input)")
            store = _store(self.run_dir, self)
            meter = Meter()

            def client(spec: str, role: str, **overrides: Any) -> ModelClient:
                return ModelClient.create(spec, role, store=store, meter=meter, **overrides)

            judges, skipped = split_judges(
                [client(spec, "judge", temperature=0.0, max_tokens=defaults.max_judge_tokens)
                 for spec in self.judges],
                self.agent,
            )
            return SessionContext(
                agent=PersonaAgent(client(self.agent, "persona", temperature=defaults.agent_temperature,
                                          max_tokens=defaults.max_agent_tokens)),
                user=SimulatedUser(client(self.user, "user_sim", temperature=defaults.user_temperature,
                                          max_tokens=defaults.max_user_tokens)),
                judges=judges,
                verdict_judges=[
                    client(j.name, "session_judge", temperature=0.0,
                           max_tokens=defaults.max_verdict_tokens)
                    for j in judges
                ],
                skipped_judges=skipped,
                store=store,
                transcripts=Path(store.run_dir) / "transcripts",
            )

        return _once(self, build)


@dataclass(frozen=True)
class MemoryDialogueSettings:
    """A Studio run of the memory dialogue graph. Input: ``{"user_id": "...", "messages": [...]}``;
    ``memories`` is the memory bank (a directory, or a Chroma server's ``http://`` URL)."""

    model: str = DEFAULT_AGENT
    memories: str = "runs/memory"
    k: int = 5

    def live(self) -> MemoryDialogueContext:
        def build() -> MemoryDialogueContext:
            responder = ModelClient.create(self.model, "memory_responder", temperature=0.7, max_tokens=256)
            return MemoryDialogueContext(responder=responder, bank=MemoryBank(self.memories), k=self.k)

        return _once(self, build)


persona_eval = persona_eval_graph(EvalSettings, EvalInput, EvalOutput).compile(name="persona_eval")
session = session_graph(SessionSettings, SessionInput, SessionOutput).compile(name="session")
memory_dialogue = memory_dialogue_graph(MemoryDialogueSettings, MemoryDialogueInput,
                                        MemoryDialogueOutput).compile(name="memory_dialogue")
