"""The default executor: every persona's graph in this process's event loop.

``--concurrency C`` bounds both the personas in flight (C places, each running one unit after another)
and the requests in flight per endpoint (the model layer's limiter), so C means C requests at a time to a
server, whatever the number of models.
"""

from __future__ import annotations

import asyncio

from personagraph.graphs.persona_eval import build_graph
from personagraph.models import Meter
from personagraph.models.openai_http import close_sessions
from personagraph.runs.executors.base import EvalJob, build_context, run_unit
from personagraph.store import RunStore, sqlite_checkpointer


class LocalExecutor:
    name = "local"

    async def run(self, job: EvalJob, store: RunStore, meter: Meter) -> None:
        config = job.config
        context = build_context(
            config, job.settings, store, meter, job.agents, job.on_item, job.plugins, job.judges,
            persona_scores=False,
        )
        try:
            async with sqlite_checkpointer(job.run_dir, store) as saver:
                graph = build_graph().compile(checkpointer=saver)
                units = job.units()
                queue = iter(units)

                async def place(turn: int) -> None:
                    await _wait_turns(turn)
                    for persona in queue:  # shared: each place takes the next unit when its own ends
                        await run_unit(graph, context, persona, config, job.outcomes[persona.id],
                                       checkpointed=True)

                await asyncio.gather(*(place(turn) for turn in range(min(config.concurrency, len(units)))))
        finally:
            await close_sessions()


async def _wait_turns(turns: int) -> None:
    """Waits ``turns`` turns of the event loop. The ``concurrency`` places of the run start one per turn: the
    units let in go on to their first call while the next ones start. Started all at once, every unit would
    take each step of its start before any took the next, and the first call would wait for all of them
    (docs/benchmarks.md#throughput). Only the units in flight exist as tasks, so memory and the time to
    act on a signal do not grow with the number of personas queued."""
    for _ in range(turns):
        await asyncio.sleep(0)
