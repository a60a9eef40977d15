"""Every run kind reports its progress as the CLI draws it: each stage announces a total the library knows
and its last event reaches it (no bar stops short, and none is missing)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from personagraph import (
    abehavior_alignment,
    aevaluate,
    ajudge_check,
    alonglamp,
    ameta_evaluate,
    apersobench,
)
from personagraph.runs.base import ProgressEvent, ProgressHandler
from personagraph.runs.simulate import judge_session
from tests.metrics.test_behavior import write_tsv
from tests.metrics.test_longlamp import write_jsonl
from tests.metrics.test_persobench import FAST, write_csv
from tests.runs.test_judge_check import write_items
from tests.runs.test_meta_eval_outcome import write_items as write_rated_items

Start = Callable[[Path, ProgressHandler], Awaitable[Any]]

KINDS: dict[str, Start] = {
    "eval": lambda d, on: aevaluate("A nurse", models=["test:agent"], judges=["test:judge"],
                                    generator="test:gen", environments=1, questions_per_task=1,
                                    run_dir=d / "run", on_progress=on),
    "meta-eval": lambda d, on: ameta_evaluate(write_rated_items(d / "items.jsonl"), judges=["test:judge"],
                                              n_resamples=100, run_dir=d / "run", on_progress=on),
    "judge-check": lambda d, on: ajudge_check(items=str(write_items(d / "items.jsonl")),
                                              judges=["test:judge"], generator="test:gen", n_resamples=200,
                                              run_dir=d / "run", on_progress=on),
    "persobench": lambda d, on: apersobench(write_csv(d), model="test:agent", score=FAST, run_dir=d / "run",
                                            on_progress=on),
    "longlamp": lambda d, on: alonglamp(write_jsonl(d), model="test:agent", retriever="recency",
                                        run_dir=d / "run", on_progress=on),
    "behavior": lambda d, on: abehavior_alignment(write_tsv(d / "d.tsv"), labeller="test:labeller",
                                                  system="test:system", n_resamples=100, run_dir=d / "run",
                                                  on_progress=on),
}


@pytest.mark.parametrize("kind", KINDS)
async def test_every_stage_announces_its_total_and_reaches_it(kind: str, tmp_path: Path) -> None:
    events: list[ProgressEvent] = []
    await KINDS[kind](tmp_path, events.append)
    last = {event.stage: event for event in events}
    assert last, "no progress at all"
    assert all(event.total for event in last.values()), last  # every stage's total is known
    assert {stage: (e.done, e.total) for stage, e in last.items() if e.done != e.total} == {}


async def test_judging_a_saved_session_counts_its_turns_and_the_verdict(tmp_path: Path) -> None:
    lines = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "howdy"},
             {"role": "user", "content": "where from?"}, {"role": "assistant", "content": "Texas"}]
    path = tmp_path / "plain.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    events: list[ProgressEvent] = []
    await judge_session(path, tmp_path / "run", judges=["test:j"], persona="A cowboy",
                        on_progress=events.append)
    last = {event.stage: (event.done, event.total) for event in events}
    assert last == {"turns": (2, 2), "session verdict": (1, 1)}


@pytest.mark.parametrize("kind", KINDS)
async def test_a_finished_run_run_again_shows_what_it_reused(kind: str, tmp_path: Path) -> None:
    """Run again on its finished directory, a run shows every stage complete and says which items an
    earlier run finished, rather than bars standing at 0."""
    await KINDS[kind](tmp_path, lambda event: None)
    events: list[ProgressEvent] = []
    await KINDS[kind](tmp_path, events.append)
    last = {event.stage: event for event in events}
    assert last
    assert {s: (e.done, e.total, e.reused) for s, e in last.items()
            if not e.done == e.total == e.reused} == {}
