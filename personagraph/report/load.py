"""Reading a run directory for reports: the store's meta and records, ``summary.json``, call statistics.

Everything is read once, read-only, and checked: a path that is not a run directory, an unreadable store or
an unparsable ``summary.json`` is a one-line :class:`PersonagraphError`. Eval scores are rebuilt from the
store (``runs.eval.build_summary``), so a run that was interrupted still reports what it finished.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from personagraph.errors import PersonagraphError
from personagraph.redact import scrub
from personagraph.runs.base import Summary
from personagraph.runs.eval import EvalConfig, build_summary
from personagraph.store import STORE_FILE, RunLock, RunStore

EVAL_KINDS = ("eval",)
SESSION_KINDS = ("simulate", "session")
MEMORY_KINDS = ("memory-retrieval", "memory-dialogue")
METRIC_KINDS = ("persobench", "score", "longlamp", "behavior", "behavior-alignment")
BEHAVIOR_KINDS = ("behavior", "behavior-alignment")


@dataclass
class Run:
    """One run directory, loaded.

    Attributes:
        path: the run directory.
        name: a short label (the directory name; made unique when several runs are loaded).
        kind: the store's meta ``kind`` (``eval``, ``simulate``, ``memory-retrieval``, …).
        meta: every meta key, secrets redacted.
        summary: ``summary.json`` ({} when absent); for eval runs the score part is rebuilt from the store.
        records: record kind → rows, in insertion order.
        calls: ``RunStore.call_stats()`` (tokens and latency per role and model over the run's whole life).
        span: (first, last) record creation time, or None.
        writer: the process writing the run when it was read ("process N on HOST"), None for a finished
            or stopped run: its figures are then of what had finished so far.
    """

    path: Path
    name: str
    kind: str
    meta: dict[str, Any]
    summary: dict[str, Any]
    records: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    calls: list[dict[str, Any]] = field(default_factory=list)
    span: tuple[float, float] | None = None
    writer: str | None = None
    cache: dict[str, Any] = field(default_factory=dict, repr=False)

    def rows(self, kind: str) -> list[dict[str, Any]]:
        """The records of one kind ([] when there are none)."""
        return self.records.get(kind, [])

    @property
    def config(self) -> dict[str, Any]:
        """The run's config: meta ``config``, else the one meta ``*_config`` dict (e.g. MADial's)."""
        value = self.meta.get("config")
        if not isinstance(value, dict):
            named = [v for k, v in self.meta.items() if k.endswith("_config") and isinstance(v, dict)]
            value = named[0] if len(named) == 1 else {}
        return value

    @property
    def in_progress(self) -> str | None:
        """The line a view or report shows for a run still being written (None when it is not)."""
        if self.writer is None:
            return None
        if isinstance(self.meta.get("studio"), dict):  # personagraph.studio.STUDIO_META
            return (f"{self.name} is open in a LangGraph Studio server ({self.writer}): each run is recorded as "
                    "it ends, so these figures are of the runs finished so far; stop the server to close it")
        return (f"{self.name} is in progress ({self.writer} is writing it): these figures are of what had "
                "finished when it was read")

    @property
    def is_eval(self) -> bool:
        return self.kind in EVAL_KINDS and bool(self.summary.get("models"))


SUMMARY_FILES = ("summary.json", "meta_eval.json")  # meta-eval writes its summary under its own name


def _read_summary(run_dir: Path) -> dict[str, Any]:
    path = next((run_dir / name for name in SUMMARY_FILES if (run_dir / name).is_file()), None)
    if path is None:
        return {}
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PersonagraphError(f"{path}: not valid JSON ({exc.__class__.__name__}); rerun the command that wrote it") from None
    if not isinstance(value, dict):
        raise PersonagraphError(f"{path}: expected a JSON object, got {type(value).__name__}")
    return value



def _guess_kind(kinds: dict[str, int], summary: dict[str, Any]) -> str:
    if "verdict" in kinds or "answer" in kinds:
        return "eval"
    if "session" in kinds:
        return "simulate"
    if "madial_summary" in kinds or "madial_verdict" in kinds:
        return "memory-dialogue"
    return str(summary.get("kind") or "unknown")


def load_run(run_dir: str | Path, *, name: str | None = None) -> Run:
    """Loads a run directory for a report, a view or a comparison.

    Raises:
        PersonagraphError: not a directory, no run store, an unreadable store or summary.
    """
    path = Path(run_dir)
    if not path.exists():
        raise PersonagraphError(f"{path}: no such run directory")
    if not path.is_dir():
        raise PersonagraphError(f"{path}: not a directory (give a run directory, e.g. runs/eval)")
    if not (path / STORE_FILE).is_file():
        raise PersonagraphError(f"{path}: not a run directory (no {STORE_FILE})")
    writer = RunLock.holder(path)  # before reading: a run that ends meanwhile is read finished or not at all
    store = RunStore(path, readonly=True)
    try:
        kinds = store.kinds()
        records = {kind: [_shown(r) for r in store.records(kind)] for kind in sorted(kinds)}
        calls = store.call_stats()
        meta, span = store.raw_meta()
        summary = _read_summary(path)
        kind = str(meta.get("kind") or _guess_kind(kinds, summary))
        if kind in EVAL_KINDS:
            summary = {**summary, **_eval_scores(store, summary)}
    except sqlite3.DatabaseError as exc:
        raise PersonagraphError(f"{store.path}: the run store is unreadable ({exc})") from None
    except json.JSONDecodeError as exc:
        raise PersonagraphError(f"{store.path}: a stored record is not valid JSON ({exc.msg})") from None
    finally:
        store.close()
    meta.pop("schema_version", None)
    return Run(path=path, name=name or path.resolve().name, kind=kind, meta=scrub(meta),
               summary=scrub(summary), records=records, calls=calls, span=span, writer=writer)


SHOWN_CHARS = 20_000
"""The longest text of a record a report or view shows (a runaway reply stored by an older version, or a
plug-in's, can be megabytes: ten 5 MB answers made a 55 MB page, 16 s and 830 MB to build)."""


def _shown(value: Any) -> Any:
    """``value`` (a record) with every text longer than :data:`SHOWN_CHARS` cut there and marked."""
    if isinstance(value, str):
        if len(value) <= SHOWN_CHARS:
            return value
        return f"{value[:SHOWN_CHARS]} […{len(value) - SHOWN_CHARS} more characters, not shown]"
    if isinstance(value, dict):
        return {key: _shown(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_shown(item) for item in value]
    return value


def _eval_scores(store: RunStore, summary: dict[str, Any]) -> dict[str, Any]:
    """The score part of an eval summary, rebuilt from the store; ``summary.json``'s when that fails."""
    config = store.get_meta("config")
    if not isinstance(config, dict):
        return {}
    try:
        EvalConfig.model_validate(config)
    except ValueError:
        return {}
    try:
        return build_summary(store).model_dump(mode="json", exclude=set(Summary.model_fields))
    except (ValueError, KeyError, TypeError) as exc:
        raise PersonagraphError(
            f"{store.path}: stored eval records do not parse ({exc.__class__.__name__}: {str(exc).splitlines()[0]})"
        ) from None


def load_runs(run_dirs: list[str | Path]) -> list[Run]:
    """Loads several runs; their names are made unique (``a``, ``a-2``, …) for labels."""
    runs: list[Run] = []
    seen: dict[str, int] = {}
    for run_dir in run_dirs:
        run = load_run(run_dir)
        count = seen.get(run.name, 0) + 1
        seen[run.name] = count
        if count > 1:
            run.name = f"{run.name}-{count}"
        runs.append(run)
    return runs
