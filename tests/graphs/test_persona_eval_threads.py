"""The PersonaGym graph runs on the event loop: no node or routing function hops to a worker thread."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from personagraph.runs.eval import EvalConfig
from personagraph.runs.eval import run as run_eval


class CountingExecutor(ThreadPoolExecutor):
    def __init__(self) -> None:
        super().__init__(max_workers=2)
        self.submitted: list[str] = []

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        self.submitted.append(repr(getattr(fn, "args", fn)))
        return super().submit(fn, *args, **kwargs)


async def test_a_persona_unit_sends_no_work_to_the_default_executor(run_dir: Path) -> None:
    executor = CountingExecutor()
    asyncio.get_running_loop().set_default_executor(executor)  # LangGraph runs sync graph functions there
    config = EvalConfig(personas=["A 70-year-old retired cowboy from Texas"], models=["test:agent"],
                        judges=["test:judge"], generator="test:gen", environments=2, questions_per_task=1)
    summary = await run_eval(config, run_dir)
    assert summary.personas_finished == 1 and summary.llm_calls > 10
    assert executor.submitted == []  # sync routing and join functions cost 6 thread hops per persona
