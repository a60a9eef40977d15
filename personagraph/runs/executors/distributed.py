"""The Ray executor: persona units as Ray tasks, one writer for the run store.

Design. Each unfinished persona (all its models and judges: questions and exemplars are shared across
models, so a persona is the natural unit) runs as one Ray task that builds the same graph and role
clients as the local executor. Workers never open the run directory: SQLite's WAL needs every writer
on the same host, and a cluster's workers are not. Every store operation goes to one **store actor**
pinned to the driver's node, which owns the only write connection — so the driver side writes, as with
the local executor, and nothing is batched up in a worker: each finished call and item is committed as
it finishes (the actor runs its calls one at a time, in the order each worker sent them). Resume is the
local executor's: a call whose key is stored is never sent again; finished units (``unit_done``) are
skipped. A unit cut short (worker lost, driver killed) runs again and gets its finished calls from the
response cache.

Plug-in agents (``--agent module:attr``) travel as their paths, never as objects (which may not pickle):
each worker process loads them once (:class:`~personagraph.runs.plugins.Plugins`), first putting on
its ``sys.path`` the directories the driver imported them from. A :class:`PersonagraphError` in a worker
(a path that does not load there) ends the run with its one-line message, as it would locally.

``--concurrency C`` stays C requests in flight in total: at most ``min(units, cluster CPUs)`` tasks run
at once and each task's endpoint limiter gets ``C // tasks`` (at least 1).
"""

from __future__ import annotations

import asyncio
import logging
import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import astuple
from typing import Any

from personagraph.errors import PersonagraphError
from personagraph.graphs.persona_eval import build_graph
from personagraph.models import Meter, ModelSettings
from personagraph.models.openai_http import close_sessions
from personagraph.runs.base import settle_collector
from personagraph.runs.executors.base import EvalJob, UnitOutcome, build_context, run_unit
from personagraph.runs.plugins import Plugins
from personagraph.schemas import Persona
from personagraph.store import CallRow, RunStore

POLL_S = 0.2


def _ray() -> Any:
    try:
        import ray  # optional and heavy: imported only when the ray executor is asked for
    except ImportError:
        raise PersonagraphError("--executor ray needs Ray: pip install 'personagraph[ray]'") from None
    return ray


class StoreActor:
    """The run store, served to workers by one Ray actor on the driver's node (the one writer)."""

    def __init__(self, run_dir: str) -> None:
        self.store = RunStore(run_dir, lock=False)  # the driver holds the run lock
        self.stages: list[str] = []

    def get_call(self, key: str) -> tuple | None:
        row = self.store.get_call(key)
        return astuple(row) if row else None

    def put_call(self, row: tuple, request: dict[str, Any], replace: bool = False) -> None:
        self.store.put_call(CallRow(*row), request, replace=replace)

    def put(self, kind: str, id: str, data: Any, unit: str) -> None:
        self.store.put(kind, id, data, unit=unit)

    def get(self, kind: str, id: str) -> dict[str, Any] | None:
        return self.store.get(kind, id)

    def records(self, kind: str, unit: str | None) -> list[dict[str, Any]]:
        return self.store.records(kind, unit=unit)

    def get_meta(self, key: str, default: Any) -> Any:
        return self.store.get_meta(key, default)

    def item(self, stage: str) -> None:
        self.stages.append(stage)

    def take_items(self) -> list[str]:
        stages, self.stages = self.stages, []
        return stages

    def sync(self) -> bool:
        """Returns once every call sent before it by the same caller has been applied."""
        return True

    def close(self) -> None:
        self.store.close()


class RemoteStore:
    """A worker's view of the run store: the RunStore methods the graph and the model layer use.

    Reads wait for the actor; writes are sent without waiting (the actor applies one caller's calls in
    order) and :meth:`flush` waits for all of them and raises the first failure.
    """

    def __init__(self, actor: Any) -> None:
        self._actor = actor
        self._ray = _ray()
        self._pending: list[Any] = []

    def get_call(self, key: str) -> CallRow | None:
        row = self._ray.get(self._actor.get_call.remote(key))
        return CallRow(*row) if row else None

    def put_call(self, row: CallRow, request: dict[str, Any], *, replace: bool = False) -> None:
        self._pending.append(self._actor.put_call.remote(astuple(row), request, replace))

    def put(self, kind: str, id: str, data: Any, *, unit: str = "") -> None:
        self._pending.append(self._actor.put.remote(kind, id, data, unit))

    def get(self, kind: str, id: str) -> dict[str, Any] | None:
        return self._ray.get(self._actor.get.remote(kind, id))

    def records(self, kind: str, *, unit: str | None = None) -> list[dict[str, Any]]:
        return self._ray.get(self._actor.records.remote(kind, unit))

    def get_meta(self, key: str, default: Any = None) -> Any:
        return self._ray.get(self._actor.get_meta.remote(key, default))

    def item(self, stage: str) -> None:
        self._actor.item.remote(stage)

    def flush(self) -> None:
        pending, self._pending = self._pending, []
        self._ray.get([*pending, self._actor.sync.remote()])


_frozen = False


def run_persona_unit(
    job_config: Any, settings: ModelSettings, plugins: Plugins, actor: Any, persona: Persona,
    outcome: UnitOutcome,
) -> dict[str, Any]:
    """Body of a Ray task: one persona's graph, reading and writing through the store actor.

    Returns the task's meter (calls, cache hits, tokens, failures per role) for the driver's summary.
    """
    global _frozen
    if not _frozen:  # a worker process exists to run persona units
        settle_collector()
        _frozen = True
    store = RemoteStore(actor)
    meter = Meter()

    async def main() -> None:
        context = build_context(job_config, settings, store, meter, None, store.item, plugins,
                                persona_scores=False)
        try:
            graph = build_graph().compile()
            await run_unit(graph, context, persona, job_config, outcome, checkpointed=False)
        finally:
            await close_sessions()

    asyncio.run(main())
    store.flush()
    return {
        name: dict(getattr(meter, name))
        for name in ("calls", "cache_hits", "input_tokens", "output_tokens", "failures")
    }


def _lost(exc: BaseException) -> PersonagraphError:
    """A failure of the cluster itself (a node, the store actor or a Ray process lost) as the run's one line:
    what a unit finished is stored, and the next run does the rest."""
    return PersonagraphError(
        f"the Ray cluster lost a node or actor this run needed ({type(exc).__name__}); finished items are "
        "saved — run the same command again to resume"
    )


@contextmanager
def _ray_messages_logged() -> Iterator[None]:
    """Ray's driver prints the cluster's error messages (a node marked dead, a worker killed) on the terminal
    as they come, with colour codes; while a run uses Ray they go to the ``ray`` logger instead (shown with
    --verbose), and the run says what they meant in its own line."""
    from ray._private import worker  # optional dependency; the printer is Ray's, looked up at each message

    printer = getattr(worker, "print_to_stdstream", None)
    if printer is None:
        yield
        return

    def logged(data: dict[str, Any], ignore_prefix: bool = False) -> None:
        for line in data.get("lines", []):
            logging.getLogger("ray").info("(%s) %s", data.get("pid", "ray"), line)

    worker.print_to_stdstream = logged
    try:
        yield
    finally:
        worker.print_to_stdstream = printer


def _user_error(exc: BaseException) -> PersonagraphError | None:
    """The PersonagraphError a task raised (Ray wraps it), restated for the driver; None for any other."""
    cause = getattr(exc, "cause", exc)
    if isinstance(cause, PersonagraphError):
        return PersonagraphError(f"{cause} (on a Ray worker)")
    return None


def _merge(meter: Meter, counts: dict[str, dict[str, int]]) -> None:
    for name, per_role in counts.items():
        counter = getattr(meter, name)
        for role, n in per_role.items():
            counter[role] = counter.get(role, 0) + n


class RayExecutor:
    name = "ray"

    def __init__(self, address: str | None = None) -> None:
        self.address = address
        _ray()  # fail early, with the install hint, when Ray is missing

    def _init(self) -> bool:
        ray = _ray()
        if ray.is_initialized():
            return False
        kwargs: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.ERROR}
        if not self.address:
            kwargs["include_dashboard"] = False
        try:
            with warnings.catch_warnings():  # Ray warns of a timed-out client connection, then raises it
                warnings.filterwarnings("ignore", category=UserWarning, module=r"ray(\.|$)")
                ray.init(address=self.address or os.environ.get("RAY_ADDRESS") or None, **kwargs)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            where = self.address or "a local Ray instance"
            raise PersonagraphError(f"--ray-address {where}: cannot join the Ray cluster ({exc})") from None
        return True

    async def run(self, job: EvalJob, store: RunStore, meter: Meter) -> None:
        if job.agents:
            names = ", ".join(agent.name for agent in job.agents)
            raise PersonagraphError(
                f"--executor ray loads plug-in agents on each worker from module:attr paths; pass the path "
                f"instead of the agent object ({names}), or use --executor local"
            )
        if job.judges:
            names = ", ".join(judge.name for judge in job.judges)
            raise PersonagraphError(
                f"--executor ray loads plug-in judges on each worker from module:attr paths; pass the path "
                f"instead of the judge object ({names}), or use --executor local"
            )
        ray = _ray()
        todo = job.units()
        if not todo:
            return
        with _ray_messages_logged():
            await self._run(ray, job, store, meter, todo)

    async def _run(self, ray: Any, job: EvalJob, store: RunStore, meter: Meter, todo: list[Persona]) -> None:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # optional dependency

        config = job.config
        started = self._init()
        actor = None
        try:
            here = ray.get_runtime_context().get_node_id()
            actor = (
                ray.remote(StoreActor)
                .options(num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=False))
                .remote(str(job.run_dir))
            )
            slots = max(1, min(len(todo), int(ray.cluster_resources().get("CPU", 1))))
            settings = job.settings.model_copy(update={"concurrency": config.concurrency}).shared_by(slots)
            task = ray.remote(run_persona_unit).options(max_retries=1)
            queue, running = list(todo), {}
            while queue or running:
                while queue and len(running) < slots:
                    persona = queue.pop(0)
                    ref = task.remote(config, settings, job.plugins, actor, persona, job.outcomes[persona.id])
                    running[asyncio.wrap_future(ref.future())] = (ref, persona)
                done, _ = await asyncio.wait(
                    list(running), timeout=POLL_S, return_when=asyncio.FIRST_COMPLETED
                )
                for stage in await asyncio.wrap_future(actor.take_items.remote().future()):
                    job.on_item(stage)
                for future in done:
                    _, persona = running.pop(future)
                    try:
                        _merge(meter, future.result())
                    except Exception as exc:  # noqa: BLE001 - a lost unit is recorded, a user error ends the run
                        if (error := _user_error(exc)) is not None:
                            for pending, (other, _) in running.items():
                                pending.cancel()
                                ray.cancel(other)
                            raise error from None
                        reason = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:500]
                        store.put(
                            "error",
                            f"{persona.id}-executor",
                            {"stage": "executor", "error": reason},
                            unit=persona.id,
                        )
            await asyncio.wrap_future(actor.sync.remote().future())
        except ray.exceptions.RayError as exc:  # the driver's own calls: the actor or its node is gone
            raise _lost(exc) from None
        finally:
            if actor is not None:
                with suppress(ray.exceptions.RayError):  # a lost actor has nothing left to close
                    try:
                        ray.get(actor.close.remote(), timeout=30)
                    finally:
                        ray.kill(actor)
            if started:
                ray.shutdown()
