"""The run directory: one SQLite file where every finished LLM call and every finished item lands at once.

Resume is "skip what is there": LLM calls are looked up by their cache key before any request is sent,
and graph outputs (environments, questions, answers, verdicts, …) are rows keyed by ``(kind, id)``.
Summaries and reports read this file only, so they can be rebuilt from any run directory, finished or not.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from personagraph.errors import PersonagraphError

STORE_FILE = "run.sqlite"
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
  created REAL NOT NULL
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


def _dump(data: BaseModel | dict[str, Any] | list[Any]) -> str:
    if isinstance(data, BaseModel):
        return data.model_dump_json()
    return json.dumps(data, ensure_ascii=False, sort_keys=True)


class RunStore:
    """A run directory's SQLite store; safe to share between the coroutines and threads of one process.

    Args:
        run_dir: the run directory (created if missing).
        readonly: open an existing store for reading only (reports, views).
    """

    def __init__(self, run_dir: str | Path, *, readonly: bool = False) -> None:
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / STORE_FILE
        if readonly and not self.path.is_file():
            raise PersonagraphError(f"{self.run_dir}: not a run directory (no {STORE_FILE})")
        if not readonly:
            if self.run_dir.exists() and not self.run_dir.is_dir():
                raise PersonagraphError(f"--run-dir {self.run_dir}: exists and is not a directory")
            self.run_dir.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        uri = f"file:{self.path}?mode=ro" if readonly else f"file:{self.path}"
        try:
            self._db = sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA busy_timeout = 10000")
            if not readonly:
                self._db.execute("PRAGMA journal_mode = WAL")
                self._db.execute("PRAGMA synchronous = NORMAL")
                self._check_version()
                self._db.executescript(_SCHEMA)
            else:
                self._db.execute("SELECT count(*) FROM records").fetchone()
        except sqlite3.DatabaseError as exc:
            raise PersonagraphError(
                f"{self.path}: the run store is unreadable ({exc}); it was left untouched — "
                "use another --run-dir"
            ) from None

    def _check_version(self) -> None:
        tables = {row[0] for row in self._db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "meta" in tables:
            row = self._db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            if row and int(json.loads(row[0])) != SCHEMA_VERSION:
                raise PersonagraphError(
                    f"{self.path}: store schema version {row[0]} is not {SCHEMA_VERSION}; use another --run-dir"
                )
        elif tables:
            raise PersonagraphError(f"{self.path}: not a personagraph run store; it was left untouched")
        self._db.executescript(_SCHEMA)
        self._db.execute(
            "INSERT OR IGNORE INTO meta(key, value) VALUES ('schema_version', ?)", (json.dumps(SCHEMA_VERSION),)
        )

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
        """Closes the connection (idempotent)."""
        with self._lock:
            self._db.close()

    # --- meta -------------------------------------------------------------------------------------
    def set_meta(self, key: str, value: Any) -> None:
        """Stores a JSON value under ``key`` (run config, versions, prompt hashes, …)."""
        with self._tx() as db:
            db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, json.dumps(value)))

    def get_meta(self, key: str, default: Any = None) -> Any:
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return json.loads(row[0]) if row else default

    # --- LLM calls (the response cache) ----------------------------------------------------------
    def get_call(self, key: str) -> CallRow | None:
        """Returns the finished call with this cache key, if any."""
        with self._lock:
            row = self._db.execute(
                "SELECT key, role, model, text, input_tokens, output_tokens, latency_s FROM calls WHERE key=?",
                (key,),
            ).fetchone()
        return CallRow(*row) if row else None

    def put_call(self, row: CallRow, request: dict[str, Any]) -> None:
        """Records a finished call; the first result for a key wins (committed before returning)."""
        with self._lock:  # one statement: its own transaction (autocommit), one round trip to SQLite
            self._db.execute(
                "INSERT OR IGNORE INTO calls(key, role, model, request, text, input_tokens, output_tokens,"
                " latency_s, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    row.key, row.role, row.model, json.dumps(request, ensure_ascii=False), row.text,
                    row.input_tokens, row.output_tokens, row.latency_s, time.time(),
                ),
            )

    def call_stats(self) -> list[dict[str, Any]]:
        """Calls, tokens and latency per role and model, for summaries and reports."""
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
        with self._lock:  # one statement: its own transaction (autocommit)
            self._db.execute(
                "INSERT OR REPLACE INTO records(kind, id, unit, data, created) VALUES (?, ?, ?, ?, ?)",
                (kind, id, unit, _dump(data), time.time()),
            )

    def get(self, kind: str, id: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._db.execute("SELECT data FROM records WHERE kind=? AND id=?", (kind, id)).fetchone()
        return json.loads(row[0]) if row else None

    def records(self, kind: str, *, unit: str | None = None) -> list[dict[str, Any]]:
        """All rows of a kind (optionally of one unit), in insertion order."""
        sql = "SELECT data FROM records WHERE kind=?"
        args: tuple[Any, ...] = (kind,)
        if unit is not None:
            sql += " AND unit=?"
            args += (unit,)
        with self._lock:
            rows = self._db.execute(sql + " ORDER BY created, id", args).fetchall()
        return [json.loads(row[0]) for row in rows]

    def kinds(self) -> dict[str, int]:
        """Row counts per record kind."""
        with self._lock:
            rows = self._db.execute("SELECT kind, count(*) FROM records GROUP BY kind").fetchall()
        return dict(rows)
