"""Plug-ins: the one place ``module:attr`` paths and objects are told apart from model specs and loaded.

A name in a run's ``models`` or ``judges`` list is a model spec when it starts with a known provider
(``openai:``, ``local:``, ``test:``), a plug-in path when it is any other ``module:attr``, or the name of
an object given from Python beside the config (:func:`split_objects`, :func:`given_by_name`). Paths are
loaded once per process (:func:`load_plugins`) and travel to worker processes as :class:`Plugins` (paths,
not objects: objects may not pickle, so only the local executor takes them).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from personagraph.agents import Agent
from personagraph.agents.plugin import adapt, load_agent
from personagraph.errors import PersonagraphError
from personagraph.judges.base import Judge, PluginJudge, as_judge
from personagraph.models import ModelClient, parse_spec
from personagraph.models.spec import names_a_provider


class Named(Protocol):
    """What a run names an object by (an :class:`Agent`, a :class:`Judge`)."""

    name: str


N = TypeVar("N", bound=Named)


def is_plugin_path(name: str) -> bool:
    """True for a ``module:attr`` plug-in path, False for a model spec (``provider:name``, or anything
    without a colon, which fails as a spec with the spec's error)."""
    return ":" in name and not names_a_provider(name)


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


def check_judge_names(names: Iterable[str], given: Iterable[str] = ()) -> None:
    """Fails before a run starts on a judge name that is neither the name of a judge object ``given``, a
    loadable ``module:attr`` plug-in, nor a model spec (the plug-in loader's or the spec parser's one-line
    error)."""
    objects = set(given)
    for name in names:
        if name in objects:
            continue
        if is_plugin_path(name):
            load_plugins([name])
        else:
            parse_spec(name)


def judge_for(
    name: str,
    role: str,
    *,
    given: Mapping[str, Judge] | None = None,
    sys_path: Iterable[str] = (),
    **client: Any,
) -> Judge:
    """The judge a ``judges`` entry names: the judge object ``given`` under that name (``judges=[obj]``
    from Python), a :class:`PluginJudge` for a ``module:attr`` path (``--judge module:attr``, loaded once
    per process, from ``sys_path`` directories too), else the model client ``ModelClient.create(name, role,
    **client)`` (store, meter, settings, sampling)."""
    if given and name in given:
        return given[name]
    if is_plugin_path(name):
        return PluginJudge(load_plugins([name], sys_path)[0])
    return ModelClient.create(name, role, **client)


def object_name(obj: Any) -> str:
    """The name results use for an agent object given without one: its ``run_name`` (``.with_config(run_name=
    …)``), its own ``name`` (``compile(name=…)``, an :class:`Agent`'s), else ``module:qualname``."""
    config = getattr(obj, "config", None)
    run_name = config.get("run_name") if isinstance(config, Mapping) else None
    if isinstance(run_name, str) and run_name.strip():
        return run_name.strip()
    name = getattr(obj, "name", None)
    if isinstance(name, str) and name.strip():
        return name.strip()
    target = obj if hasattr(obj, "__qualname__") else type(obj)
    return f"{getattr(target, '__module__', 'object')}:{target.__qualname__}"


def as_agent(obj: Any, name: str) -> Agent:
    """``obj`` if it already is an :class:`Agent`, else the plug-in adapter of it named ``name``."""
    return obj if isinstance(obj, Agent) else adapt(obj, name)


Given = Iterable[Any] | Mapping[str, Any]
"""A ``models=`` or ``judges=`` argument: a list of names and objects, ``{name: object}`` entries in it, or
one ``{name: object}`` mapping."""


def _named(items: Given) -> Iterable[tuple[str | None, Any]]:
    """(the name given, the item) for each entry; None where the list gives no name."""
    for item in [items] if isinstance(items, Mapping) else items:
        if isinstance(item, Mapping):
            yield from ((str(name), obj) for name, obj in item.items())
        else:
            yield None, item


def split_objects(items: Given, field: str, wrap: Callable[[Any, str], N]) -> tuple[list[str], list[N]]:
    """One ``models=`` or ``judges=`` argument (names: model specs and ``module:attr`` paths; objects, by
    :func:`object_name` or under the name a ``{name: object}`` entry gives) as the run's names and the
    objects among them, each ``wrap(obj, name)``: :func:`as_agent` for agents,
    :func:`~personagraph.judges.base.as_judge` for judges. The config holds the names; the objects go to
    the run beside it (:func:`given_by_name`).

    Raises:
        PersonagraphError: a name given twice in ``field`` (saying how to name objects apart), a mapping
            entry whose value is a name, or an object that cannot be adapted.
    """
    names: list[str] = []
    objects: list[N] = []
    for given, item in _named(items):
        if isinstance(item, str):
            if given is not None:
                raise PersonagraphError(f"{field}: {given!r}: a {{name: object}} entry names an object; "
                                        f"list the spec or path {item!r} itself")
            name = item.strip()
        else:
            wrapped = wrap(item, given or object_name(item))
            if given is not None and wrapped.name != given:
                raise PersonagraphError(f"{field}: {given!r} names an object called {wrapped.name!r}; "
                                        "use its name as the key")
            objects.append(wrapped)
            name = wrapped.name
        if name in names:
            hint = ""
            if not isinstance(item, str):
                hint = (f"; name each object: {field}={{'a': obj_a, 'b': obj_b}}, graph.compile(name='a') or "
                        "obj.with_config(run_name='a')")
            raise PersonagraphError(f"{field}: {name!r} is given twice{hint}")
        names.append(name)
    return names, objects


def split_models(items: Given) -> tuple[list[str], list[Agent]]:
    """A ``models=`` list as the run's model names and the agent objects among it (:func:`split_objects`)."""
    return split_objects(items, "models", as_agent)


def split_judge_objects(items: Given) -> tuple[list[str], list[Judge]]:
    """A ``judges=`` list as the run's judge names and the judge objects among it (:func:`split_objects`)."""
    return split_objects(items, "judges", as_judge)


def given_by_name(objects: Iterable[N], names: Iterable[str], param: str, field: str) -> dict[str, N]:
    """The objects a run is given beside its config (agents, judges), by name; each must be listed in the
    config's ``field`` (a run never uses an object its config does not name, nor runs a default instead).

    Raises:
        PersonagraphError: an object whose name is not in ``names``.
    """
    listed = set(names)
    by_name: dict[str, N] = {}
    for obj in objects:
        if obj.name not in listed:
            raise PersonagraphError(f"{param}: {obj.name!r} is not in {field}; list its name there")
        by_name[obj.name] = obj
    return by_name
