"""The default executor: every persona's graph in this process's event loop.

``--concurrency C`` bounds both the personas in flight and the requests in flight per endpoint (the
model layer's limiter), so C means C requests at a time to a server, whatever the number of models.
"""

from __future__ import annotations

import asyncio

from personagraph.graphs.persona_eval import build_graph
from personagraph.models import Meter
from personagraph.models.openai_http import close_sessions
from personagraph.runs.executors.base import EvalJob, build_context, run_unit
from personagraph.schemas import Persona
from personagraph.store import RunStore, sqlite_checkpointer


class LocalExecutor:
    name = "local"

    async def run(self, job: EvalJob, store: RunStore, meter: Meter) -> None:
        config = job.config
        context = build_context(
            config, job.settings, store, meter, job.agents, job.on_item, job.plugins, job.judges,
            persona_scores=False,
        )
        gate = asyncio.Semaphore(0)
        try:
            async with sqlite_checkpointer(job.run_dir, store) as saver:
                graph = build_graph().compile(checkpointer=saver)

                async def one(persona: Persona) -> None:
                    async with gate:
                        await run_unit(graph, context, persona, config, job.outcomes[persona.id],
                                       checkpointed=True)

                units = job.units()
                places = min(config.concurrency, len(units))
                await asyncio.gather(_open(gate, places), *(one(p) for p in units))
        finally:
            await close_sessions()


async def _open(gate: asyncio.Semaphore, places: int) -> None:
    """Opens the ``places`` of a gate one per turn of the event loop: the units let in go on to their first
    call while the next ones start. Opened all at once, every unit would take each step of its start before
    any took the next, and the first call would wait for all of them (docs/benchmarks.md#throughput)."""
    for _ in range(places):
        gate.release()
        await asyncio.sleep(0)
