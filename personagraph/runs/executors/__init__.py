"""Executors: where the persona units of an evaluation run.

``local`` (default) runs every persona's graph in this process's event loop; ``ray`` runs persona
units as Ray tasks on a cluster, writing through one store actor on the driver's node. Both write the
same rows to the same run store, so summaries, reports and resume do not care which one ran.
Plug-in agents travel as ``module:attr`` paths (:class:`~personagraph.runs.plugins.Plugins`) and are
loaded where the units run. Ray is imported only when the ``ray`` executor is asked for.
"""

from __future__ import annotations

from personagraph.errors import PersonagraphError
from personagraph.runs.executors.base import EvalJob, Executor, build_context, unit_id
from personagraph.runs.executors.distributed import RayExecutor
from personagraph.runs.executors.local import LocalExecutor

EXECUTORS = ("local", "ray")


def get_executor(name: str, *, address: str | None = None) -> Executor:
    """The executor called ``name`` (``local`` or ``ray``); ``address`` is a Ray cluster address."""
    if name == "local":
        if address:
            raise PersonagraphError("--ray-address needs --executor ray")
        return LocalExecutor()
    if name == "ray":
        return RayExecutor(address=address)
    raise PersonagraphError(f"--executor {name!r}: unknown; choose one of {', '.join(EXECUTORS)}")


__all__ = [
    "EXECUTORS",
    "EvalJob",
    "Executor",
    "LocalExecutor",
    "RayExecutor",
    "build_context",
    "get_executor",
    "unit_id",
]
