"""Write-behind batching of RunStore: rows that arrive one by one share commits, none is lost or held back."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from personagraph import store as store_module
from personagraph.store import CallRow, RunStore, sqlite_checkpointer


@pytest.fixture
def commits(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The COMMIT statements of every SQLite connection opened while the test runs (the writer's included)."""
    seen: list[str] = []
    connect = sqlite3.connect

    def traced(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        db = connect(*args, **kwargs)
        db.set_trace_callback(lambda sql: seen.append(sql) if sql.strip().upper() == "COMMIT" else None)
        return db

    monkeypatch.setattr(store_module.sqlite3, "connect", traced)
    return seen


def _committed(run_dir: Path) -> int:
    """Records another connection sees: what a process killed now would have kept."""
    db = sqlite3.connect(run_dir / "run.sqlite")
    try:
        return db.execute("SELECT count(*) FROM records").fetchone()[0]
    finally:
        db.close()


def test_rows_arriving_one_by_one_share_one_commit(run_dir: Path, commits: list[str]) -> None:
    store = RunStore(run_dir, write_behind=True)
    opened = len(commits)
    for i in range(20):  # as at low concurrency: one finished item every few milliseconds
        store.put("answer", f"a{i}", {"i": i}, unit="p")
        store.put_call(CallRow(f"k{i}", "persona", "test:m", "text", 1, 1, 0.0), {"messages": []})
        time.sleep(0.002)
    store.flush()
    assert len(commits) - opened == 1  # 40 rows in 40 ms: one commit, where each row used to commit alone
    assert _committed(run_dir) == 20
    assert store.get_call("k19").text == "text"
    store.close()


def test_a_row_commits_without_a_flush(run_dir: Path) -> None:
    store = RunStore(run_dir, write_behind=True)
    store.put("answer", "a", {"text": "kept"}, unit="p")
    deadline = time.monotonic() + 10 * store_module.COMMIT_INTERVAL_S + 10
    while _committed(run_dir) == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _committed(run_dir) == 1  # the writer commits on its own, after at most its interval
    store.close()


def test_reads_see_every_queued_row_and_close_commits_the_rest(run_dir: Path, commits: list[str]) -> None:
    store = RunStore(run_dir, write_behind=True)
    store.put("answer", "a1", {"text": "one"}, unit="p")
    assert store.get("answer", "a1") == {"text": "one"}  # a read flushes what was queued before it
    after_first = len(commits)
    assert store.records("answer") == [{"text": "one"}]  # nothing queued since: no second commit
    assert len(commits) == after_first
    store.put("answer", "a2", {"text": "two"}, unit="p")
    store.close()
    assert _committed(run_dir) == 2


async def test_a_checkpoint_is_written_only_after_the_rows_before_it(run_dir: Path) -> None:
    # A node's records must be committed before the checkpoint that marks the node done: a kill -9
    # between the two would otherwise resume past the node with its records gone.
    store = RunStore(run_dir, write_behind=True)
    try:
        store.put("answer", "a1", {"text": "howdy"})
        assert _committed(run_dir) == 0  # still waiting for its batch
        async with sqlite_checkpointer(run_dir, store) as saver:
            config = {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": "c1"}}
            await saver.aput_writes(config, [("answers", ["a1"])], task_id="task-1")
            assert _committed(run_dir) == 1
            store.put("answer", "a2", {"text": "partner"})
            await saver.aput(config, empty_checkpoint(), {}, {})
            assert _committed(run_dir) == 2
    finally:
        store.close()


async def test_aflush_commits_without_a_worker_thread(run_dir: Path) -> None:
    store = RunStore(run_dir, write_behind=True)
    try:
        store.put("answer", "a1", {"text": "howdy"})
        await store.aflush()
        assert _committed(run_dir) == 1
        await store.aflush()  # nothing queued since: returns at once
    finally:
        store.close()


async def test_the_checkpointer_runs_on_the_event_loop_without_a_thread(run_dir: Path) -> None:
    # AsyncSqliteSaver sent every cursor step to a thread of its own and back (about one wake-up per LLM
    # call at C = 8); the run directory's checkpointer reads and writes inline.
    store = RunStore(run_dir, write_behind=True)
    try:
        before = set(threading.enumerate())
        async with sqlite_checkpointer(run_dir, store) as saver:
            config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
            saved = await saver.aput(config, empty_checkpoint(), {}, {})
            assert (await saver.aget_tuple(saved)) is not None
            assert [c async for c in saver.alist(config)]
            assert set(threading.enumerate()) <= before
    finally:
        store.close()
