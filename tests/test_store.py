import math
import os
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from personagraph.errors import PersonagraphError
from personagraph.store import CallRow, RunLock, RunStore, sqlite_checkpointer


def test_records_and_calls_survive_reopening(run_dir: Path) -> None:
    store = RunStore(run_dir)
    store.put("note", "a1", {"text": "howdy"}, unit="p1")
    store.put("note", "a2", {"text": "partner"}, unit="p2")
    store.put_call(CallRow("k1", "judge", "test:j", "raw", 3, 4, 0.1), {"messages": []})
    store.set_meta("config", {"seed": 1})
    store.close()
    again = RunStore(run_dir)
    assert again.get("note", "a1") == {"text": "howdy"}
    assert [r["text"] for r in again.records("note", unit="p2")] == ["partner"]
    assert again.get_call("k1").text == "raw"
    assert again.get_meta("config") == {"seed": 1}
    assert again.kinds() == {"note": 2}


def test_every_row_of_a_kind_comes_back_with_its_unit_and_id_as_json_wrote_it(run_dir: Path) -> None:
    store = RunStore(run_dir, write_behind=True)  # a pending row is read too
    store.put("note", "b", {"n": 1}, unit="p1")
    store.put("note", "a", {"nan": float("nan"), "big": 2**70, "text": "été"}, unit="p2")  # orjson refuses 2
    store.put("other", "c", {"n": 3}, unit="p1")
    rows = store.keyed_records("note")
    assert [(unit, id) for unit, id, _ in rows] == [("p1", "b"), ("p2", "a")]
    value = rows[1][2]
    assert math.isnan(value.pop("nan")) and value == {"big": 2**70, "text": "été"}
    assert [data["n"] for data in store.records("note")[:1]] == [1]


def test_first_result_for_a_call_key_wins(run_dir: Path) -> None:
    store = RunStore(run_dir)
    store.put_call(CallRow("k", "r", "m", "first", 0, 0, 0), {})
    store.put_call(CallRow("k", "r", "m", "second", 0, 0, 0), {})
    assert store.get_call("k").text == "first"


def test_calls_come_back_with_their_requests_in_order_and_by_model(run_dir: Path) -> None:
    store = RunStore(run_dir, write_behind=True)  # a pending row is read too
    for key, model in (("b", "judge-model"), ("a", "agent-model"), ("c", "judge-model")):
        request = {"messages": [{"role": "user", "content": key}], "params": {"max_tokens": 9}}
        store.put_call(CallRow(key, "judge", model, f"reply {key}", 3, 2, 0.5, [{"token": "x"}]), request)
    assert [(row.key, request["messages"][0]["content"]) for row, request in store.calls()] == [
        ("b", "b"), ("a", "a"), ("c", "c")]
    row, request = store.calls("judge-model")[1]
    assert (row.text, row.logprobs, request["params"]) == ("reply c", [{"token": "x"}], {"max_tokens": 9})
    assert store.calls("no such model") == []
    store.close()


def test_corrupted_store_is_reported_and_left_untouched(run_dir: Path) -> None:
    run_dir.mkdir()
    path = run_dir / "run.sqlite"
    garbage = b"this is not sqlite" * 100
    path.write_bytes(garbage)
    with pytest.raises(PersonagraphError, match="run.sqlite.*left untouched"):
        RunStore(run_dir)
    assert path.read_bytes() == garbage


def test_a_damaged_index_is_found_before_anything_is_written(run_dir: Path) -> None:
    """An index entry that no longer matches its row passes SQLite's quick_check and every table scan; the
    run's first insert would then fail with the file already written to. The store refuses it at open."""
    import sqlite3

    store = RunStore(run_dir)
    for i in range(300):
        store.put("item", f"i{i}", {"n": i}, unit=f"unit-{i:03d}")
    store.close()
    path = run_dir / "run.sqlite"
    db = sqlite3.connect(path)
    pages = [row[0] for row in db.execute("SELECT pageno FROM dbstat WHERE name = 'records_kind_unit' "
                                          "AND pagetype = 'leaf'")]
    page_size = db.execute("PRAGMA page_size").fetchone()[0]
    db.close()
    data = bytearray(path.read_bytes())
    start = (pages[0] - 1) * page_size
    at = data.index(b"unit-050", start, start + page_size)
    data[at + 7:at + 8] = b"/"  # "unit-05/": still between its neighbours, no longer its row's unit
    damaged = bytes(data)
    path.write_bytes(damaged)
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA quick_check").fetchone() == ("ok",)  # what the store used to rely on
    db.close()
    with pytest.raises(PersonagraphError, match="run.sqlite: the run store is corrupted .*left untouched"):
        RunStore(run_dir)
    assert path.read_bytes() == damaged


def test_an_unknown_file_format_in_the_header_is_a_damaged_store(run_dir: Path) -> None:
    """SQLite opens a file whose header's write version is above 2 read-only; the folder is fine, so the
    error names the file and its header, and leaves it as it was."""
    store = RunStore(run_dir)
    store.put("item", "a", {"n": 1})
    store.close()
    path = run_dir / "run.sqlite"
    data = bytearray(path.read_bytes())
    data[18] = 3
    path.write_bytes(bytes(data))
    expected = (r"run.sqlite: the run store is corrupted \(its header's file format write version is 3, "
                r"not 1 or 2\)")
    with pytest.raises(PersonagraphError, match=expected + "; it was left untouched"):
        RunStore(run_dir)
    assert path.read_bytes() == bytes(data)


def _in_the_schema(data: bytes) -> int:
    return data.index(b"NULL", 0, 4096)  # a column's NOT NULL in the schema, on the first page


@pytest.mark.parametrize(("at", "byte", "problem"), [
    (_in_the_schema, 0x80, r"malformed database schema"),
    (lambda data: 18, 3, r"its header's file format write version is 3, not 1 or 2\)"),
])
async def test_a_damaged_checkpoint_store_is_one_line_and_left_as_it_was(
    run_dir: Path, at: Callable[[bytes], int], byte: int, problem: str,
) -> None:
    """The checkpoints are checked as the run store is, before anything writes to them. SQLite's error for a
    damaged schema quotes its bytes, and Python raises a UnicodeDecodeError for a message that is not UTF-8;
    a header's write version above 2 makes SQLite open the file read-only, and the run's first checkpoint
    write would fail after the run had started. Each is the checkpoint store's one-line error."""
    store = RunStore(run_dir)
    async with sqlite_checkpointer(run_dir, store) as saver:
        config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        await saver.aput(config, empty_checkpoint(), {}, {})
    store.close()
    path = run_dir / "checkpoints.sqlite"
    data = bytearray(path.read_bytes())
    data[at(bytes(data))] = byte
    path.write_bytes(bytes(data))
    with pytest.raises(PersonagraphError, match=r"checkpoints.sqlite: the checkpoint store is unreadable \("
                                                + problem):
        async with sqlite_checkpointer(run_dir):
            pass
    assert path.read_bytes() == bytes(data)


def test_foreign_sqlite_file_is_not_adopted(run_dir: Path) -> None:
    import sqlite3

    run_dir.mkdir()
    db = sqlite3.connect(run_dir / "run.sqlite")
    db.execute("CREATE TABLE songs (title TEXT)")
    db.commit()
    db.close()
    with pytest.raises(PersonagraphError, match="not a personagraph run store"):
        RunStore(run_dir)


def test_readonly_needs_an_existing_run(tmp_path: Path) -> None:
    with pytest.raises(PersonagraphError, match="not a run directory"):
        RunStore(tmp_path / "nothing", readonly=True)


def test_run_dir_that_is_a_file_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_text("x")
    with pytest.raises(PersonagraphError, match="not a directory"):
        RunStore(target)


def _hold_lock_in_child(run_dir: Path) -> "subprocess.Popen[str]":
    code = (
        "import sys; from personagraph.store import RunStore; s = RunStore(sys.argv[1]);"
        " print('locked', flush=True); sys.stdin.read()"
    )
    child = subprocess.Popen([sys.executable, "-c", code, str(run_dir)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "locked"
    return child


def test_a_second_process_on_one_run_dir_is_refused(run_dir: Path) -> None:
    child = _hold_lock_in_child(run_dir)
    try:
        with pytest.raises(PersonagraphError, match=rf"in use by process {child.pid} on \S+; wait"):
            RunStore(run_dir)
        assert RunStore(run_dir, readonly=True).kinds() == {}  # readers are never locked out
    finally:
        child.stdin.close()
        child.wait(10)
    RunStore(run_dir).close()  # the holder finished: the lock is free


def test_a_reader_learns_who_is_writing_a_run_and_nothing_once_it_stopped(run_dir: Path) -> None:
    assert RunLock.holder(run_dir) is None  # no run directory yet
    child = _hold_lock_in_child(run_dir)
    try:
        assert RunLock.holder(run_dir) == f"process {child.pid} on {socket.gethostname()}"
        assert RunLock.holder(run_dir) is not None  # asking let go of its own shared lock at once
    finally:
        child.kill()  # killed, as a crash: the file still names it, the kernel dropped the lock
        child.wait(10)
    assert RunLock.holder(run_dir) is None


def test_a_lock_left_by_a_killed_process_is_recovered(run_dir: Path) -> None:
    child = _hold_lock_in_child(run_dir)
    child.kill()
    child.wait(10)
    assert str(child.pid) in (run_dir / "run.lock").read_text()  # the crash left the file behind
    store = RunStore(run_dir)
    assert (run_dir / "run.lock").read_text().split()[0] == str(os.getpid())
    store.close()


def test_stores_of_one_process_share_the_lock(run_dir: Path) -> None:
    outer = RunStore(run_dir)
    inner = RunStore(run_dir)
    inner.close()
    inner.close()  # idempotent: does not release the outer store's share
    child = subprocess.run([sys.executable, "-c", "import sys; from personagraph.store import RunStore;"
                            " RunStore(sys.argv[1])", str(run_dir)], capture_output=True, text=True)
    assert "in use by process" in child.stderr
    outer.close()


def test_a_replaced_call_wins_over_the_stored_one(run_dir: Path) -> None:
    """A stored reply found to be a transient fault (cut off) is replaced by the next attempt's, in the pending
    batch of a write-behind store and on disk."""
    store = RunStore(run_dir, write_behind=True)
    store.put_call(CallRow("k", "judge", "test:j", '{"score": 4, "rat', 1, 1, 0.1), {})
    store.put_call(CallRow("k", "judge", "test:j", '{"score": 4}', 1, 1, 0.1), {}, replace=True)
    assert store.get_call("k").text == '{"score": 4}'
    store.close()
    reopened = RunStore(run_dir, readonly=True)
    assert reopened.get_call("k").text == '{"score": 4}'
    reopened.close()


def test_a_store_is_blank_until_a_call_or_record_is_written(run_dir: Path) -> None:
    store = RunStore(run_dir)
    assert store.created and store.is_blank()
    store.set_meta("kind", "eval")
    assert store.is_blank()
    store.put("answer", "a1", {"id": "a1"})
    assert not store.is_blank()
    store.close()
    reopened = RunStore(run_dir, readonly=True)
    assert not reopened.created
    reopened.close()


@pytest.mark.parametrize("name", ["run.sqlite", "run.lock", "checkpoints.sqlite", "transcripts"])
def test_a_link_at_a_run_file_is_refused_before_anything_is_written(tmp_path: Path, name: str) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / name).symlink_to(tmp_path / "elsewhere")
    with pytest.raises(PersonagraphError, match="is a symbolic link"):
        RunStore(run_dir)
    assert not (tmp_path / "elsewhere").exists()


def test_a_store_sqlite_may_not_write_is_cannot_write_there(run_dir: Path, monkeypatch) -> None:
    """In a directory this user may not write (0555: the lock file exists, SQLite cannot make its -wal file)
    SQLite answers SQLITE_READONLY. Root writes there anyway, so the answer is made the same way SQLite makes
    it for any read-only connection: ``PRAGMA query_only``."""
    import sqlite3

    RunStore(run_dir).close()
    connect = sqlite3.connect

    def read_only(*args, **kwargs):
        db = connect(*args, **kwargs)
        db.execute("PRAGMA query_only = ON")
        return db

    monkeypatch.setattr("personagraph.store.sqlite3.connect", read_only)
    with pytest.raises(PersonagraphError, match=r"--run-dir .*: cannot write there \(attempt to write"):
        RunStore(run_dir)


def test_a_lock_file_its_holder_removed_is_never_the_one_locked(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A refused start removes the lock file it made while it still holds it; a process that had opened
    that file meanwhile then locks the file at the path (made again), never the removed one."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    holder = RunLock(run_dir)
    assert holder.made
    opened_meanwhile = os.open(run_dir / "run.lock", os.O_RDWR)
    holder.release(remove=True)
    assert not (run_dir / "run.lock").exists()
    real, calls = RunLock._open, []

    def first_the_removed_file(self: RunLock) -> tuple[int, bool]:
        calls.append(1)
        return (opened_meanwhile, False) if len(calls) == 1 else real(self)

    monkeypatch.setattr(RunLock, "_open", first_the_removed_file)
    taker = RunLock(run_dir)
    fd, _ = RunLock._held[taker.path]
    assert len(calls) == 2 and taker.made
    assert os.fstat(fd).st_ino == os.stat(run_dir / "run.lock").st_ino
    taker.release()
