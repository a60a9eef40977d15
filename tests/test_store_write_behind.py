"""Write-behind batching of RunStore: rows that arrive one by one share commits, none is lost or held back."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from personagraph import store as store_module
from personagraph.errors import PersonagraphError
from personagraph.store import CallRow, RunStore, sqlite_checkpointer


@pytest.fixture
def commits(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The COMMIT statements of every SQLite connection opened while the test runs."""
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


async def test_rows_arriving_one_by_one_share_one_commit(run_dir: Path, commits: list[str]) -> None:
    store = RunStore(run_dir, write_behind=True)
    opened = len(commits)
    for i in range(20):  # as at low concurrency: one finished item every few milliseconds
        store.put("answer", f"a{i}", {"i": i}, unit="p")
        store.put_call(CallRow(f"k{i}", "persona", "test:m", "text", 1, 1, 0.0), {"messages": []})
        await asyncio.sleep(0.002)
    assert _committed(run_dir) == 0 and store.get_call("k19").text == "text"  # pending, and seen by this store
    store.flush()
    assert len(commits) - opened == 1  # 40 rows in 40 ms: one commit, where each row used to commit alone
    assert _committed(run_dir) == 20
    assert store.get_call("k19").text == "text"
    store.close()


async def test_a_row_commits_without_a_flush_and_no_thread_does_it(run_dir: Path) -> None:
    store = RunStore(run_dir, write_behind=True)
    threads = set(threading.enumerate())
    store.put("answer", "a", {"text": "kept"}, unit="p")
    deadline = time.monotonic() + 10 * store_module.COMMIT_INTERVAL_S + 10
    while _committed(run_dir) == 0 and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert _committed(run_dir) == 1  # the loop's timer commits it, after at most the interval
    assert set(threading.enumerate()) <= threads  # a writer thread's wake-ups cost more than the commit
    store.close()


def test_a_write_without_a_running_loop_commits_at_once(run_dir: Path) -> None:
    store = RunStore(run_dir, write_behind=True)
    store.put("answer", "a", {"text": "kept"}, unit="p")
    assert _committed(run_dir) == 1  # no loop, no timer: nothing may wait for a flush that may never come
    store.close()


async def test_a_failed_commit_is_raised_by_the_next_write(run_dir: Path) -> None:
    store = RunStore(run_dir, write_behind=True)
    store.put("answer", "a", {"text": "kept"}, unit="p")
    blocker = sqlite3.connect(run_dir / "run.sqlite", timeout=0)
    blocker.execute("BEGIN IMMEDIATE")  # another writer holds the lock past the busy timeout
    store._db.execute("PRAGMA busy_timeout = 0")
    store._commit_on_timer()  # as the timer does: nobody to raise to, so the error is kept
    blocker.rollback()
    blocker.close()
    with pytest.raises(PersonagraphError, match="cannot write the run store"):
        store.put("answer", "b", {"text": "next"}, unit="p")
    with pytest.raises(PersonagraphError, match="cannot write the run store"):
        store.close()


async def test_a_commit_on_the_loop_cancels_the_batch_timer(run_dir: Path) -> None:
    store = RunStore(run_dir, write_behind=True)
    store.put("answer", "a", {"text": "kept"}, unit="p")
    timer = store._commit_timer
    assert timer is not None
    store.flush()
    assert timer.cancelled() and store._commit_timer is None  # no wake-up to commit an empty batch
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
        assert _committed(run_dir) == 0  # pending in its batch
        async with sqlite_checkpointer(run_dir, store) as saver:
            config = {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": "c1"}}
            await saver.aput_writes(config, [("answers", ["a1"])], task_id="task-1")
            assert _committed(run_dir) == 1
            store.put("answer", "a2", {"text": "partner"})
            await saver.aput(config, empty_checkpoint(), {}, {})
            assert _committed(run_dir) == 2
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
