"""The run directory: one SQLite file where every finished LLM call and every finished item lands at once.

Resume is "skip what is there": LLM calls are looked up by their cache key before any request is sent,
and graph outputs (environments, questions, answers, verdicts, …) are rows keyed by ``(kind, id)``.
Summaries and reports read this file only, so they can be rebuilt from any run directory, finished or not.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import socket
import sqlite3
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, closing, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata, CheckpointTuple
from langgraph.checkpoint.sqlite import SqliteSaver
from pydantic import BaseModel

from personagraph.errors import PersonagraphError
from personagraph.files import RUN_FOLDERS
from personagraph.records import meta_problem, record_problem

STORE_FILE = "run.sqlite"
CHECKPOINTS_FILE = "checkpoints.sqlite"  # LangGraph's checkpoints of the run's graphs (sessions, persona units)
LOCK_FILE = "run.lock"
STORE_FILES = (STORE_FILE, f"{STORE_FILE}-wal", f"{STORE_FILE}-shm", f"{STORE_FILE}-journal", LOCK_FILE,
               CHECKPOINTS_FILE, f"{CHECKPOINTS_FILE}-wal", f"{CHECKPOINTS_FILE}-shm", f"{CHECKPOINTS_FILE}-journal")
"""The files SQLite and the lock create in a run directory: none of them may be a symbolic link (a link
planted in a directory someone hands you would have the run write wherever it points)."""
RESULT_FILES = (CHECKPOINTS_FILE, "transcripts", "summary.json", "judge_check.json", "meta_eval.json",
                "judge-check")
"""What only a run that wrote its store leaves in a run directory (besides ``*_summary.json``): next to any of
them, a missing or empty ``run.sqlite`` is a lost store, never a new run."""
COMMIT_INTERVAL_S = 0.5
"""Write-behind: a batch commits at most this long after its first row (at once on a flush, a read, a
checkpoint write or close): one commit for every row of the interval, where each row used to cost one."""
SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS calls (
  key TEXT PRIMARY KEY,
  role TEXT NOT NULL,
  model TEXT NOT NULL,
  request TEXT NOT NULL,
  text TEXT NOT NULL,
  input_tokens INTEGER NOT NULL DEFAULT 0,
  output_tokens INTEGER NOT NULL DEFAULT 0,
  latency_s REAL NOT NULL DEFAULT 0,
  created REAL NOT NULL,
  logprobs TEXT
);
CREATE TABLE IF NOT EXISTS records (
  kind TEXT NOT NULL,
  id TEXT NOT NULL,
  unit TEXT NOT NULL DEFAULT '',
  data TEXT NOT NULL,
  created REAL NOT NULL,
  PRIMARY KEY (kind, id)
);
CREATE INDEX IF NOT EXISTS records_kind_unit ON records (kind, unit);
"""


@dataclass(frozen=True)
class CallRow:
    """One finished LLM call, as stored (the raw text, never an error message)."""

    key: str
    role: str
    model: str
    text: str
    input_tokens: int
    output_tokens: int
    latency_s: float
    logprobs: list[dict[str, Any]] | None = None  # OpenAI's logprobs.content, when the call asked for them


def _call_row(row: Sequence[Any]) -> CallRow:
    """A ``calls`` row read in the column order key, role, model, text, input_tokens, output_tokens,
    latency_s, logprobs (JSON text or NULL)."""
    return CallRow(*row[:7], json.loads(row[7]) if row[7] is not None else None)


def _version(value: str) -> int | None:
    try:
        return int(json.loads(value))
    except (TypeError, ValueError):
        return None


def _sql(text: str) -> str:
    """``text`` as an SQL string literal (for the delete statement a damaged-row error suggests)."""
    return "'" + text.replace("'", "''") + "'"


def _dump(data: BaseModel | dict[str, Any] | list[Any]) -> str:
    if isinstance(data, BaseModel):
        return data.model_dump_json()
    return json.dumps(data, ensure_ascii=False, sort_keys=True)


try:  # a call's request (messages + params, a few kB) is serialised once per call: orjson is ~5× faster
    import orjson

    def _dump_request(request: dict[str, Any]) -> str:
        try:
            return orjson.dumps(request).decode()
        except TypeError:
            return json.dumps(request, ensure_ascii=False)

    def _load(text: str) -> Any:
        """A stored JSON value; orjson reads a summary's hundred thousand rows in half of json's time, and
        json reads what orjson refuses (NaN, integers beyond 64 bits, lone surrogates), to the same value."""
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            return json.loads(text)
except ImportError:  # pragma: no cover - orjson comes with langchain-core's langsmith
    def _dump_request(request: dict[str, Any]) -> str:
        return json.dumps(request, ensure_ascii=False)

    _load = json.loads


def _cannot_write(run_dir: Path, why: str) -> PersonagraphError:
    """The one line for a run directory this process may read but not write (permissions, read-only media)."""
    return PersonagraphError(f"--run-dir {run_dir}: cannot write there ({why}); view and report read a "
                             "finished run as it is — use another --run-dir to run")


def _one_line(text: str) -> str:
    return " ".join(text.split())[:120]


def _damage(db: sqlite3.Connection, path: Path) -> str | None:
    """What makes an existing store unfit to write to (one line), None when nothing does; checked before
    anything writes to it. A header whose file format write version is above 2: SQLite opens such a file
    read-only, and the first write fails. Then SQLite's first integrity problem: ``integrity_check``, not
    ``quick_check``, since only it compares each index with its table, and a damaged index that passes the
    quick check fails the run's first insert, after the file was written to. Its message may quote damaged
    bytes, so it is read as bytes and decoded leniently. Then the schema's text, which the check does not
    read: SQLite's readers, and Chroma's, fail on a schema that is not UTF-8."""
    if (version := _write_version(path)) is not None and version > 2:
        return f"its header's file format write version is {version}, not 1 or 2"
    factory, db.text_factory = db.text_factory, bytes
    try:
        row = db.execute("PRAGMA integrity_check(1)").fetchone()
        schema = db.execute("SELECT name, sql FROM sqlite_master").fetchall()
    finally:
        db.text_factory = factory
    answer = row[0] if row else b"no answer"
    text = answer.decode("utf-8", "replace") if isinstance(answer, bytes) else str(answer)
    if text != "ok":
        return _one_line(text)
    for name, sql in schema:  # not UTF-8: passes the check, and fails every reader that decodes it
        try:
            (sql or b"").decode("utf-8")
        except UnicodeDecodeError:
            return f"the schema of {(name or b'?').decode('utf-8', 'replace')!r} is not UTF-8 text"
    return None


def _sqlite_error(exc: Exception) -> str:
    """An SQLite error as one line. A damaged schema's error quotes its bytes, and Python raises a
    ``UnicodeDecodeError`` for a message that is not UTF-8: the message is decoded leniently instead."""
    if isinstance(exc, UnicodeDecodeError) and isinstance(exc.object, bytes):
        return _one_line(exc.object.decode("utf-8", "replace"))
    return _one_line(str(exc))


def _write_version(path: Path) -> int | None:
    """The SQLite header's file format write version (byte 18: 1 legacy, 2 WAL), None when the file has no
    header to read."""
    try:
        with path.open("rb") as file:
            header = file.read(19)
    except OSError:
        return None
    return header[18] if len(header) == 19 else None


def _unwritable(folder: Path) -> str | None:
    """Why no file can be made in ``folder`` (None: one can): a probe file is made and removed again, since
    permission bits do not tell for root, immutable directories or read-only mounts."""
    try:
        fd, probe = tempfile.mkstemp(prefix=".personagraph-probe.", dir=folder)
    except OSError as exc:
        return exc.strerror or str(exc)
    os.close(fd)
    os.unlink(probe)
    return None


def _refuse_link(path: Path) -> None:
    """Refuses a symbolic link where a run file belongs (see :data:`STORE_FILES`)."""
    if path.is_symlink():
        raise PersonagraphError(
            f"{path}: is a symbolic link (to {os.readlink(path)}); personagraph never writes through a link in a "
            "run directory — replace it with the file itself or use another --run-dir"
        )


def refuse_links(run_dir: str | Path, names: Sequence[str] = STORE_FILES) -> None:
    """Refuses a run directory where any of ``names`` is a symbolic link (the run directory itself may be
    one: that is the choice of whoever runs the command)."""
    for name in names:
        _refuse_link(Path(run_dir) / name)


def _results_without_store(run_dir: Path) -> list[str]:
    """The results of an earlier run in ``run_dir`` (:data:`RESULT_FILES`, ``*_summary.json``)."""
    try:
        names = sorted(os.listdir(run_dir))
    except OSError:
        return []
    return [name for name in names if name in RESULT_FILES or name.endswith("_summary.json")]


def _identity(info: os.stat_result) -> tuple[int, int]:
    return (info.st_dev, info.st_ino)


def _entries(folder: Path) -> set[str]:
    """The names in ``folder`` (none when it cannot be listed)."""
    try:
        return set(os.listdir(folder))
    except OSError:
        return set()


def _holder_name(fd: int) -> str:
    """The holder a lock file names ("process N on HOST"; it writes ``pid host``)."""
    holder = os.pread(fd, 200, 0).decode("utf-8", "replace").split()
    return f"process {holder[0]} on {holder[1]}" if len(holder) >= 2 else "another process"


class RunLock:
    """One writing process per run directory: an advisory lock on ``run.lock``, which names its holder.

    Two processes on one run directory would both run every unfinished item, pay for the calls twice and
    leave records that disagree with the response cache. The lock is an ``flock`` held as long as the
    process has the directory open, so the kernel drops it when the process dies: a lock left by a crash
    is recovered by the next run, whatever the file says. The file holds ``pid host`` for the error
    message. Within one process the lock is shared (counted), so nested stores on one directory work.
    A local memory bank's writers take the same kind of lock on their folder (``name``, ``flag``), waiting
    ``wait_s`` for the holder before they refuse.
    """

    _held: dict[Path, tuple[int, int]] = {}  # resolved lock path → (file descriptor, users)
    _guard = threading.Lock()

    def __init__(self, run_dir: str | Path, *, name: str = LOCK_FILE, flag: str = "--run-dir",
                 wait_s: float = 0.0) -> None:
        self.path = Path(run_dir).resolve() / name  # the directory resolved, never the lock file itself
        self._flag = flag  # the option naming the directory, for the message of a refusal
        self._wait_s = wait_s  # how long to wait for the holder to finish before refusing
        self._released = False
        self.made = False  # this lock made the lock file (a refused start removes it again)
        with self._guard:
            fd, users = self._held.get(self.path, (-1, 0))
            if users == 0:
                fd = self._acquire()
            self._held[self.path] = (fd, users + 1)

    def _acquire(self) -> int:
        """Opens and locks the lock file. A refused start removes the lock file it made while it still holds
        it, so a process that opened that file meanwhile may lock a file no longer in the directory: the
        file locked must be the one at the path, else it is opened again."""
        deadline = time.monotonic() + self._wait_s
        while True:
            fd, made = self._open()
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                who = _holder_name(fd)
                os.close(fd)
                if time.monotonic() < deadline:
                    time.sleep(0.05)
                    continue
                raise PersonagraphError(
                    f"{self.path.parent}: in use by {who}; wait for it to finish or use another {self._flag}"
                ) from None
            try:
                current = os.stat(self.path, follow_symlinks=False)
            except OSError:
                current = None
            if current is not None and (current.st_dev, current.st_ino) == _identity(os.fstat(fd)):
                break
            os.close(fd)  # removed by the process that held it: try the directory's file again
            if not self.path.parent.is_dir():
                raise PersonagraphError(
                    f"{self.path.parent}: another process began a run there and removed it again; "
                    "run the same command again"
                )
        self.made = made
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()} {socket.gethostname()}\n".encode(), 0)
        except OSError as exc:  # a full disk, a quota: the lock file this call made goes while still held
            if made:
                with suppress(OSError):
                    os.unlink(self.path)
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
            raise _cannot_write(self.path.parent, exc.strerror or str(exc)) from None
        return fd

    def _open(self) -> tuple[int, bool]:
        """The lock file's descriptor and whether this call made the file (O_NOFOLLOW: a planted link is
        refused, never followed and its target truncated)."""
        try:
            try:
                return os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644), True
            except FileExistsError:
                return os.open(self.path, os.O_RDWR | os.O_NOFOLLOW), False
        except OSError as exc:
            _refuse_link(self.path)
            raise _cannot_write(self.path.parent, exc.strerror or str(exc)) from None

    @staticmethod
    def holder(run_dir: str | Path) -> str | None:
        """Who is writing ``run_dir`` now ("process N on HOST"), or None when no process holds its lock: a
        reader's test (a shared lock tried and let go at once), so a view can say a run is in progress."""
        try:
            fd = os.open(Path(run_dir) / LOCK_FILE, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            return None  # no lock file (or a link, which no writer made): nothing holds it
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return _holder_name(fd)
        else:
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
        finally:
            os.close(fd)

    def release(self, *, remove: bool = False, remove_dir: bool = False) -> None:
        """Lets go of the lock (idempotent); the last user in the process unlocks the file. ``remove``: the
        lock file goes too when this lock made it and nobody else in the process uses it (a refused start),
        and with ``remove_dir`` its directory when that is empty then."""
        with self._guard:
            if self._released:
                return
            self._released = True
            fd, users = self._held.pop(self.path)
            if users > 1:
                self._held[self.path] = (fd, users - 1)
                return
            if remove and self.made:
                with suppress(OSError):  # while still held: see _acquire
                    os.unlink(self.path)
                    if remove_dir:
                        self.path.parent.rmdir()
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


class RunStore:
    """A run directory's SQLite store; safe to share between the coroutines and threads of one process.

    Args:
        run_dir: the run directory (created if missing).
        readonly: open an existing store for reading only (reports, views).
        write_behind: ``put``/``put_call`` hold their row in memory and commit it with the others in one
            transaction: before each checkpoint write (:class:`_StoreFirstSaver`), at any read, flush or
            close, and at the latest :data:`COMMIT_INTERVAL_S` after the batch's first row (a timer on the
            writer's event loop; a write from a thread without a running loop commits at once). This
            store's reads see every row written; other connections see a row once its batch commits. A
            row is finished when it is committed: a process killed between is simply missing it (a call
            is sent again on resume), never half-writes it. ``evaluate`` uses it: a commit per row cost
            ~0.5 ms of event-loop time per LLM call.
        lock: hold the run directory's :class:`RunLock` until :meth:`close` (writable stores only);
            False for a helper process of the process that holds it (the Ray store actor).
    """

    def __init__(
        self, run_dir: str | Path, *, readonly: bool = False, write_behind: bool = False, lock: bool = True
    ) -> None:
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / STORE_FILE
        if readonly and not self.path.is_file():
            raise PersonagraphError(f"{self.run_dir}: not a run directory (no {STORE_FILE})")
        self.created = False  # this store made its run.sqlite (a refused start removes what it made)
        self.checked_checkpoints = False  # the checkpoint store was found sound when this store opened
        self._made_dir = False
        self._before: set[str] = set()
        if not readonly:
            self._made_dir = self._make_dir()
            refuse_links(self.run_dir, (*STORE_FILES, *RUN_FOLDERS))
        try:
            self._run_lock = RunLock(self.run_dir) if lock and not readonly else None
        except BaseException:  # refused or failed to lock: a run directory this call made goes again
            if self._made_dir:
                with suppress(OSError):  # not empty: another process's by now
                    self.run_dir.rmdir()
            raise
        self._check_reads = readonly  # a writable store checked every row when it opened (_verify)
        try:
            if not readonly:  # under the lock: no other process adds or removes run files now
                self._before = _entries(self.run_dir)
                self.created = STORE_FILE not in self._before
                self._refuse_lost_store()
            self._open(readonly, write_behind)
        except BaseException:
            if hasattr(self, "_db"):
                self._db.close()
            self._remove_made(readonly)
            raise

    def _make_dir(self) -> bool:
        """Creates the run directory, or says in one line why it cannot be; True when this call made it."""
        if self.run_dir.exists() and not self.run_dir.is_dir():
            raise PersonagraphError(f"--run-dir {self.run_dir}: exists and is not a directory")
        where = f"--run-dir {self.run_dir}"
        try:
            self.run_dir.mkdir(parents=True)
        except (NotADirectoryError, FileExistsError):
            if self.run_dir.is_dir():
                return False  # made meanwhile by another process: it is not this one's to remove
            raise PersonagraphError(f"{where}: a part of the path is a file, not a directory") from None
        except OSError as exc:
            raise PersonagraphError(f"{where}: cannot create it ({exc.strerror or exc})") from None
        return True

    def _remove_made(self, readonly: bool = False) -> None:
        """Removes the run files this store made (those not in the directory when it took the lock), the lock
        file and the directory when it made them, then lets go of the lock: a refused start leaves nothing
        behind and never touches what another process made. Without the lock (a helper process of its
        holder) nothing is removed."""
        if not readonly and self._run_lock is not None:
            for name in STORE_FILES:
                if name != LOCK_FILE and name not in self._before:
                    with suppress(OSError):  # missing
                        (self.run_dir / name).unlink()
            self._run_lock.release(remove=True, remove_dir=self._made_dir)
        self._release_run_lock()

    def _refuse_lost_store(self) -> None:
        """Refuses a run directory whose store is missing or empty while results of a run are beside it: the
        scores would be rebuilt from nothing (and summary.json overwritten with none), so it is left as it is."""
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            size = None
        if size:
            return
        if found := _results_without_store(self.run_dir):
            state = "missing" if size is None else "empty (0 bytes)"
            raise PersonagraphError(
                f"{self.path}: the run store is {state}, but {', '.join(found)} hold an earlier run's results; "
                f"it is not rebuilt silently — restore {STORE_FILE} or use another --run-dir"
            )

    def _release_run_lock(self) -> None:
        if self._run_lock is not None:
            self._run_lock.release()

    def _open(self, readonly: bool, write_behind: bool) -> None:
        self._lock = threading.Lock()  # the connection; held across a batch's commit
        self._write_behind = write_behind and not readonly
        self._pending_lock = threading.Lock()  # the rows not committed yet and their timer
        self._pending: list[tuple[str, tuple[Any, ...], CallRow | None]] = []
        self._pending_calls: dict[str, CallRow] = {}
        self._commit_timer: asyncio.TimerHandle | None = None
        self._timer_loop: asyncio.AbstractEventLoop | None = None
        self._write_error: str | None = None
        uri = f"file:{self.path}?mode=ro" if readonly else f"file:{self.path}"
        try:
            self._db = sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA busy_timeout = 10000")
            if readonly:
                self._readable_on_read_only_media()
            if not readonly:
                self._verify()  # before the first write: a damaged or foreign file must stay as it was
                check_checkpoints(self.run_dir)  # and so must this one, refused before either is written
                self.checked_checkpoints = True
                self._check_version()
                self._db.execute("PRAGMA journal_mode = WAL")
                self._db.execute("PRAGMA synchronous = NORMAL")
                self._db.executescript(_SCHEMA)
                self._add_logprobs_column()
            else:
                self._db.execute("SELECT count(*) FROM records").fetchone()
        except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
            if getattr(exc, "sqlite_errorcode", 0) & 0xFF == sqlite3.SQLITE_READONLY:  # e.g. a 0555 directory
                raise _cannot_write(self.run_dir, str(exc)) from None
            if not readonly and (why := _unwritable(self.run_dir)) is not None:  # an immutable directory
                raise _cannot_write(self.run_dir, why) from None
            raise PersonagraphError(
                f"{self.path}: the run store is unreadable ({_sqlite_error(exc)}); it was left untouched — "
                "use another --run-dir"
            ) from None
        self._identity = self._file_identity()

    def _readable_on_read_only_media(self) -> None:
        """A store in WAL mode needs its ``-shm`` file even to be read; on read-only media (or a directory this
        user cannot write) it cannot be made, so the finished store is opened as immutable instead: a store
        closed cleanly holds everything in the main file."""
        try:
            self._db.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.OperationalError:
            if os.access(self.run_dir, os.W_OK):
                raise
            self._db.close()
            self._db = sqlite3.connect(f"file:{self.path}?mode=ro&immutable=1", uri=True, check_same_thread=False,
                                       isolation_level=None)

    def _file_identity(self) -> tuple[int, int] | None:
        try:
            info = os.stat(self.path)
        except OSError:
            return None
        return (info.st_dev, info.st_ino)

    def _check_still_there(self) -> None:
        """Before a commit: the store file is still the one this store opened. SQLite keeps writing to a deleted
        file without a word (a run whose directory was removed would do all its calls, then lose them)."""
        if self._identity is not None and self._file_identity() != self._identity:
            self._write_error = (
                f"{self.run_dir}: the run directory (or its {STORE_FILE}) was removed or replaced while the run "
                "was writing; the run stopped — run the same command again to start over"
            )
            raise PersonagraphError(self._write_error)

    def _verify(self) -> None:
        """Reads an existing store through (pages, then every JSON value) before anything writes to it."""
        if not self.path.is_file() or self.path.stat().st_size == 0:
            return
        untouched = "it was left untouched — use another --run-dir"
        if (problem := _damage(self._db, self.path)) is not None:
            raise PersonagraphError(f"{self.path}: the run store is corrupted ({problem}); {untouched}")
        tables = {row[0] for row in self._db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        checks = [("meta", "SELECT 'meta', key, value FROM meta"),
                  ("records", "SELECT kind, id, data FROM records"),
                  ("calls", "SELECT 'calls', key, text FROM calls")]
        for table, sql in checks:
            if table not in tables:
                continue
            try:
                for kind, key, value in self._db.execute(sql):
                    if table == "meta":
                        self._meta_value(key, value)
                    elif table == "records":
                        self._record(kind, key, value)
            except (TypeError, ValueError, sqlite3.DataError):  # UnicodeDecodeError is a ValueError
                raise PersonagraphError(
                    f"{self.path}: the run store is corrupted (unreadable row in {table}); {untouched}"
                ) from None

    def _damaged(self, where: str, problem: str, delete: str) -> PersonagraphError:
        """The one-line error for a damaged row: which row, what is wrong, how to keep the rest."""
        return PersonagraphError(
            f"{self.path}: {where} is damaged ({problem}); delete that row to keep the others "
            f"(sqlite3 {self.path} \"{delete}\") or delete the run directory"
        )

    def _record(self, kind: str, id: str, text: str) -> dict[str, Any]:
        """A record's data, checked against its kind's type (:data:`personagraph.records.RECORD_TYPES`)."""
        data = _load(text)
        problem = record_problem(kind, data)
        if problem is not None:
            raise self._damaged(f"record {kind} {id!r}", problem,
                                f"DELETE FROM records WHERE kind={_sql(kind)} AND id={_sql(id)}")
        return data

    def _meta_value(self, key: str, text: str) -> Any:
        """A meta value, checked against its key's JSON type (:data:`personagraph.records.META_TYPES`)."""
        value = json.loads(text)
        problem = meta_problem(key, value)
        if problem is not None:
            raise self._damaged(f"meta {key!r}", problem, f"DELETE FROM meta WHERE key={_sql(key)}")
        return value

    def _check_version(self) -> None:
        tables = {row[0] for row in self._db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "meta" in tables:
            row = self._db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            if row and _version(row[0]) != SCHEMA_VERSION:
                raise PersonagraphError(
                    f"{self.path}: store schema version {row[0]} is not {SCHEMA_VERSION}; use another --run-dir"
                )
        elif tables:
            raise PersonagraphError(f"{self.path}: not a personagraph run store; it was left untouched")
        self._db.executescript(_SCHEMA)
        self._db.execute(
            "INSERT OR IGNORE INTO meta(key, value) VALUES ('schema_version', ?)", (json.dumps(SCHEMA_VERSION),)
        )

    def _add_logprobs_column(self) -> None:
        """Stores written before calls kept log-probabilities get the (nullable) column on first write."""
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(calls)")}
        if "logprobs" not in columns:
            self._db.execute("ALTER TABLE calls ADD COLUMN logprobs TEXT")

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                yield self._db
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def close(self) -> None:
        """Commits the rows written so far and closes the connection (idempotent)."""
        try:
            self.flush()
        finally:
            with self._lock:
                self._db.close()
            self._release_run_lock()

    def discard(self) -> None:
        """Closes a store that holds nothing worth keeping (a start refused after it opened) and removes what
        it made (:meth:`_remove_made`)."""
        with self._lock:
            self._pending.clear()
            self._db.close()
        self._remove_made()

    # --- write-behind -----------------------------------------------------------------------------
    def _write(self, sql: str, args: tuple[Any, ...], call: CallRow | None = None) -> None:
        if not self._write_behind:
            self._raise_write_error()
            self._check_still_there()
            with self._lock:  # one statement: its own transaction (autocommit)
                self._db.execute(sql, args)
            return
        self._raise_write_error()
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        with self._pending_lock:
            if call is not None:
                self._pending_calls.setdefault(call.key, call)
            self._pending.append((sql, args, call))
            if loop is not None and (self._commit_timer is None or self._timer_loop is not loop):
                self._commit_timer = loop.call_later(COMMIT_INTERVAL_S, self._commit_on_timer)
                self._timer_loop = loop
        if loop is None:  # no loop to batch on: commit now, as no timer would
            self.flush()

    def _commit_on_timer(self) -> None:
        with self._pending_lock:
            self._commit_timer = self._timer_loop = None
        self._commit_pending()

    def _commit_pending(self) -> None:
        """Commits every pending row in one transaction, inline: a commit in WAL mode costs less than the
        thread wake-ups of handing the batch to a writer thread and back (at C = 8 such a thread woke more
        often than the event loop: 1.3 voluntary context switches per LLM call in all, 0.5 without it). A
        failed commit is kept and raised by the next write or flush (a timer has nobody to raise it to)."""
        with self._lock:  # a concurrent flush returns only once this batch is committed
            with self._pending_lock:
                rows, self._pending = self._pending, []
                self._cancel_timer()
            if rows and self._write_error is None:
                try:
                    self._check_still_there()
                except PersonagraphError:
                    rows = []  # kept in _write_error: raised by the next write or flush
            if rows and self._write_error is None:
                try:
                    self._db.execute("BEGIN IMMEDIATE")
                    for sql, args, _ in rows:
                        self._db.execute(sql, args)
                    self._db.execute("COMMIT")
                except (sqlite3.Error, ValueError) as exc:
                    self._write_error = f"{self.path}: cannot write the run store ({exc})"
                    if self._db.in_transaction:
                        self._db.execute("ROLLBACK")
            with self._pending_lock:
                for _, _, call in rows:
                    if call is not None:
                        self._pending_calls.pop(call.key, None)

    def _cancel_timer(self) -> None:
        """Drops the batch's timer when called on its loop (no wake-up for an empty batch); from another
        thread it is left to fire and find nothing to commit (TimerHandle.cancel is not thread-safe)."""
        try:
            on_its_loop = asyncio.get_running_loop() is self._timer_loop
        except RuntimeError:
            on_its_loop = False
        if self._commit_timer is not None and on_its_loop:
            self._commit_timer.cancel()
            self._commit_timer = self._timer_loop = None

    def flush(self) -> None:
        """Commits every row written so far (no-op without write-behind); raises a failed commit."""
        if self._write_behind:
            self._commit_pending()
        self._raise_write_error()

    def _raise_write_error(self) -> None:
        if self._write_error is not None:
            raise PersonagraphError(self._write_error)

    # --- meta -------------------------------------------------------------------------------------
    def set_meta(self, key: str, value: Any) -> None:
        """Stores a JSON value under ``key`` (run config, versions, prompt hashes, …)."""
        self.flush()
        with self._tx() as db:
            db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, json.dumps(value)))

    def get_meta(self, key: str, default: Any = None) -> Any:
        self.flush()
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return json.loads(row[0]) if row else default

    # --- LLM calls (the response cache) ----------------------------------------------------------
    def get_call(self, key: str) -> CallRow | None:
        """Returns the finished call with this cache key, if any."""
        pending = self._pending_calls.get(key)
        if pending is not None:
            return pending
        with self._lock:
            row = self._db.execute(
                "SELECT key, role, model, text, input_tokens, output_tokens, latency_s, logprobs FROM calls"
                " WHERE key=?",
                (key,),
            ).fetchone()
        if row is None:
            return None
        return _call_row(row)

    def put_call(self, row: CallRow, request: dict[str, Any], *, replace: bool = False) -> None:
        """Records a finished call; the first result for a key wins, unless ``replace`` (a stored reply that
        turned out to be a transient fault, replaced by the reply to a new attempt)."""
        if replace:
            with self._pending_lock:
                self._pending_calls.pop(row.key, None)
        self._write(
            f"INSERT OR {'REPLACE' if replace else 'IGNORE'} INTO calls(key, role, model, request, text,"
            " input_tokens, output_tokens,"
            " latency_s, created, logprobs) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (row.key, row.role, row.model, _dump_request(request), row.text, row.input_tokens,
             row.output_tokens, row.latency_s, time.time(),
             _dump_request(row.logprobs) if row.logprobs is not None else None),
            row,
        )

    def calls(self, model: str | None = None) -> list[tuple[CallRow, dict[str, Any]]]:
        """Every finished call (of ``model``, when given) with the request that made it (``messages`` and
        ``params``), in the order they finished: what a bench replays or counts."""
        sql = ("SELECT key, role, model, text, input_tokens, output_tokens, latency_s, logprobs, request"
               " FROM calls")
        args: tuple[Any, ...] = ()
        if model is not None:
            sql += " WHERE model=?"
            args = (model,)
        self.flush()
        with self._lock:
            rows = self._db.execute(sql + " ORDER BY created, rowid", args).fetchall()
        return [(_call_row(row), json.loads(row[8])) for row in rows]

    def call_stats(self) -> list[dict[str, Any]]:
        """Calls, tokens and latency per role and model, for summaries and reports."""
        self.flush()
        with self._lock:
            rows = self._db.execute(
                "SELECT role, model, count(*), sum(input_tokens), sum(output_tokens), sum(latency_s)"
                " FROM calls GROUP BY role, model ORDER BY role, model"
            ).fetchall()
        keys = ("role", "model", "calls", "input_tokens", "output_tokens", "latency_s")
        return [dict(zip(keys, row)) for row in rows]

    # --- records ----------------------------------------------------------------------------------
    def put(self, kind: str, id: str, data: BaseModel | dict[str, Any], *, unit: str = "") -> None:
        """Writes (or replaces) one finished item. ``unit`` groups rows, e.g. by persona."""
        self._write("INSERT OR REPLACE INTO records(kind, id, unit, data, created) VALUES (?, ?, ?, ?, ?)",
                    (kind, id, unit, _dump(data), time.time()))

    def get(self, kind: str, id: str) -> dict[str, Any] | None:
        self.flush()
        with self._lock:
            row = self._db.execute("SELECT data FROM records WHERE kind=? AND id=?", (kind, id)).fetchone()
        if row is None:
            return None
        return self._record(kind, id, row[0]) if self._check_reads else _load(row[0])

    def records(self, kind: str, *, unit: str | None = None) -> list[dict[str, Any]]:
        """All rows of a kind (optionally of one unit), in insertion order."""
        return [data for _, _, data in self._select(kind, unit)]

    def keyed_records(self, kind: str) -> list[tuple[str, str, dict[str, Any]]]:
        """Every row of a kind as ``(unit, id, data)``, in insertion order: one query where a reader of
        every unit (a run's summary) would otherwise make one per unit."""
        return self._select(kind, None)

    def _select(self, kind: str, unit: str | None) -> list[tuple[str, str, dict[str, Any]]]:
        sql = "SELECT unit, id, data FROM records WHERE kind=?"
        args: tuple[Any, ...] = (kind,)
        if unit is not None:
            sql += " AND unit=?"
            args += (unit,)
        self.flush()
        with self._lock:
            rows = self._db.execute(sql + " ORDER BY created, id", args).fetchall()
        if self._check_reads:
            return [(unit, id, self._record(kind, id, data)) for unit, id, data in rows]
        return [(unit, id, _load(data)) for unit, id, data in rows]

    def raw_meta(self) -> tuple[dict[str, Any], tuple[float, float] | None]:
        """Every meta key (its JSON value, or the text when it is not JSON) and the records' time span
        (first and last ``created``), read on this store's connection (on read-only media no other opens)."""
        self.flush()
        with self._lock:
            rows = self._db.execute("SELECT key, value FROM meta").fetchall()
            low, high = self._db.execute("SELECT min(created), max(created) FROM records").fetchone()
        meta: dict[str, Any] = {}
        for key, value in rows:
            try:
                meta[key] = json.loads(value)
            except json.JSONDecodeError:
                meta[key] = value
        return meta, (float(low), float(high)) if low is not None else None

    def is_blank(self) -> bool:
        """Whether the store holds no call and no record (only meta): nothing a run would lose."""
        self.flush()
        with self._lock:
            row = self._db.execute(
                "SELECT EXISTS(SELECT 1 FROM calls) OR EXISTS(SELECT 1 FROM records)"
            ).fetchone()
        return not row[0]

    def kinds(self) -> dict[str, int]:
        """Row counts per record kind."""
        self.flush()
        with self._lock:
            rows = self._db.execute("SELECT kind, count(*) FROM records GROUP BY kind").fetchall()
        return dict(rows)


class _StoreFirstSaver(SqliteSaver):
    """The run directory's checkpointer: LangGraph's SQLite saver, run inline on the event loop, that commits
    the run store's pending rows before each checkpoint write.

    Inline: a checkpoint read or write is one indexed statement and a commit (~0.1-0.3 ms) a few times per
    graph run, where ``AsyncSqliteSaver`` sends every cursor step (execute, fetch, close, commit) to its own
    thread and back: ~13 thread hand-offs per persona unit, about one wake-up per LLM call at C = 8.
    Store first: with a write-behind store, a node's records and calls could still be pending when LangGraph
    commits the checkpoint that marks the node done; a kill -9 between the two then left a resumed run
    skipping the node with its records lost. Flushing first keeps the order: records, then the checkpoint.
    """

    store: RunStore | None = None

    def _store_first(self) -> None:
        if self.store is not None:
            self.store.flush()

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self.get_tuple(config)

    async def alist(
        self, config: RunnableConfig | None, *, filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None, limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        for item in self.list(config, filter=filter, before=before, limit=limit):
            yield item

    async def aput(
        self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        self._store_first()
        return self.put(config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        self._store_first()
        self.put_writes(config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        self.delete_thread(thread_id)


def sqlite_damage(path: Path) -> str | None:
    """What makes an existing SQLite file unfit to write to (:func:`_damage`, or the error that opening it
    raised), in one line; None when nothing does. Read-only: the file is never written."""
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)  # a writer's transaction ends
        try:
            return _damage(db, path)
        finally:
            db.close()
    except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
        return _sqlite_error(exc)


def check_checkpoints(run_dir: str | Path) -> None:
    """Refuses in one line a run directory whose checkpoint store is not a sound SQLite database (its damage
    as :func:`_damage` finds it); a writable :class:`RunStore` checks it before it writes its own file, so
    that a refused run leaves both stores as they were."""
    path = Path(run_dir) / CHECKPOINTS_FILE
    refuse_links(run_dir, [name for name in STORE_FILES if name.startswith(CHECKPOINTS_FILE)])
    if not path.is_file() or path.stat().st_size == 0:
        return
    problem = sqlite_damage(path)
    if problem is not None and (why := _unwritable(Path(run_dir))) is not None:
        raise _cannot_write(Path(run_dir), why)  # not the file's fault: SQLite could make no -shm beside it
    if problem is not None:
        raise PersonagraphError(
            f"{path}: the checkpoint store is unreadable ({problem}); delete it and run again — "
            f"finished items stay in {STORE_FILE} and unfinished ones restart from their cached calls"
        )


@asynccontextmanager
async def sqlite_checkpointer(
    run_dir: str | Path, store: RunStore | None = None
) -> AsyncIterator[SqliteSaver]:
    """The run directory's LangGraph checkpointer (``checkpoints.sqlite``), refused in one line when the file
    is not a readable SQLite database (a damaged file is a one-line error, never a ``DatabaseError``).
    With ``store``, its pending rows commit before each checkpoint write (:class:`_StoreFirstSaver`)."""
    path = Path(run_dir) / CHECKPOINTS_FILE
    if store is None or not store.checked_checkpoints:
        check_checkpoints(run_dir)
    with closing(sqlite3.connect(path, check_same_thread=False)) as db:
        saver = _StoreFirstSaver(db)
        saver.store = store
        yield saver
