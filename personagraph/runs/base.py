"""What every run kind shares: the :class:`Run` context, the base :class:`Summary`, progress events.

A run kind (``runs/eval.py``, ``runs/simulate.py``, …) is a pydantic ``Config``, an ``async def run(config,
run_dir, *, …) -> Summary`` and its sync twin. Its set-up is the same everywhere and lives here once:

    with Run(KIND, run_dir, config, on_progress=on_progress) as run:
        run.record(prompts={...}, data={...})      # prompt/rubric versions and data-file hashes
        ...                                        # work, with run.store, run.meter, run.advance(stage)
        return run.finish(MySummary(...))          # fills the common numbers, writes the summary file

``Run`` opens the run store, refuses a directory that holds another kind of run (one line), records the
config (without secrets) and its provenance (:mod:`personagraph.provenance`: library versions, the
embedded weights' sha256, and at exit the hashes of the data files the run read), owns the call
:class:`~personagraph.models.Meter`, and turns per-item notifications into typed :class:`ProgressEvent`\\ s
whose totals the library knows (the CLI only draws them).

Outcome accounting: every :class:`Summary` carries ``failures`` (one :class:`FailedItem` per item that did
not finish: stage, item id, model, reason) and ``incomplete`` (items neither finished nor failed); its
``exit_code`` is what the CLI exits with (0, or :data:`EXIT_INCOMPLETE`).

Retry on resume: a failed item is not finished. A run kind asks :meth:`Run.pending` for each of its items
(or units) with the failures its stored record holds: an item without a record is done now, a failed one
again unless the run keeps failed items (``retry_failed=False``) or its failure is permanent (the model's
reply is stored and unusable: :data:`STORED_REPLY_FAILURES`), a finished one never. :meth:`Run.finish`
then says how many earlier failed items this run ``retried`` and how many of them it ``recovered``. The
response cache answers every call that succeeded before, so a retry sends only the calls that failed.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import gc
import html
import json
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, ParamSpec, Protocol, TypeVar
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, computed_field, field_validator

from personagraph.errors import PersonagraphError
from personagraph.files import write_atomic
from personagraph.models import Meter
from personagraph.provenance import data_file_hashes, library_versions, scoring_weight_hashes, weight_hashes
from personagraph.redact import redact_text
from personagraph.store import STORE_FILE, RunStore

EXIT_OK = 0
EXIT_INCOMPLETE = 3  # the run ended, but some items failed or did not finish (exit 2 is bad input)

_SECRET_WORDS = ("key", "secret", "password", "token")


class ConfigError(PersonagraphError):
    """A config field with a bad value; the CLI names the flag of the same name instead of the field."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


C = TypeVar("C", bound=BaseModel)


def make_config(cls: type[C], **fields: Any) -> C:
    """``cls(**fields)``, with pydantic's first complaint as a one-line :class:`ConfigError`; a name that is
    no field of ``cls`` is one too (pydantic ignores it: ``evaluate(..., questons_per_task=3)`` would run
    with the default)."""
    if unknown := sorted(set(fields) - set(cls.model_fields)):
        raise ConfigError(unknown[0], f"no such option (the options are: {', '.join(cls.model_fields)})")
    try:
        return cls(**fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"][:1]) or "config"
        raise ConfigError(field, first["msg"].removeprefix("Value error, ")) from None


REASON_CHARS = 300  # a failed item's reason is one line of at most this many characters

STORED_REPLY_FAILURES = (
    "invalid structured output",  # models/client.py: a complete reply (and its format-reminder retry) that
                                  # does not fit the schema
    "the generator returned the answer unchanged",  # judges/validity.py: a judge-check variant whose
                                                    # stored rewrite is the answer itself
    "the judge's rationale copies the response's words",  # judges/judge.py: a verdict that is the answer's
)
"""How the reason of a failure whose model reply is in the response cache begins. The model answered in full,
and its answer did not fit (or, for a judge-check variant, changed nothing): every later run gets the same
stored reply, so retrying such an item cannot change it. It is a permanent failure
(:attr:`FailedItem.permanent`): listed with its reason, retried only with ``retry_permanent``
(``--retry-permanent``: its calls are sent again past the cache; judge-check's generator answers at
temperature 0, so an unchanged variant stays failed and left out of its figures), otherwise never retried
nor counted as retried.
Everything else is transient and retried on resume: a transport failure, a timeout, a dead endpoint, and
a reply that was cut off, empty or ``null`` (the model layer never stores one: ``models/client.py``), so
an empty answer is asked again too.
"""


class FailedItem(BaseModel):
    """One item of a run that failed: where, which, for which model, and why (one line, secrets scrubbed:
    a provider's error body may echo the API key)."""

    stage: str
    item: str
    model: str | None = None
    reason: str

    @field_validator("reason", mode="before")
    @classmethod
    def _one_line(cls, value: object) -> str:
        return " ".join(redact_text(str(value or "failed")).split())[:REASON_CHARS] or "failed"

    @property
    def key(self) -> tuple[str, str]:
        """What names the item across runs: its stage and id."""
        return (self.stage, self.item)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def permanent(self) -> bool:
        """Whether the failure came from a stored model reply (see :data:`STORED_REPLY_FAILURES`): a re-run
        gets the same reply, so the item is not retried."""
        return self.reason.startswith(STORED_REPLY_FAILURES)


def is_failed(record: dict[str, Any]) -> bool:
    """Whether a stored item record (``status``: ``ok``, ``failed``, ``empty``, …; none: ok) failed."""
    return record.get("status", "ok") != "ok"


def failed_records(stage: str, records: Iterable[dict[str, Any]], model: str | None) -> list[FailedItem]:
    """The failed ones among item records (``id``, ``status``, ``error``) of one stage and model."""
    return [
        FailedItem(stage=stage, item=r["id"], model=model, reason=r.get("error"))
        for r in records
        if is_failed(r)
    ]


GENERATIONS = "generations"  # the stage of a failed generation record (:func:`generate_pending`)


def record_failures(stage: str, record: dict[str, Any] | None, model: str | None) -> list[FailedItem] | None:
    """What :meth:`Run.pending` is told about one stored item record: None (no record yet) or its failures."""
    return None if record is None else failed_records(stage, [record], model)


@dataclass(frozen=True)
class SummaryTable:
    """A summary's headline as plain text: a title, column names and rows (see :meth:`Summary.table`)."""

    title: str
    columns: list[str]
    rows: list[list[str]]


class Summary(BaseModel):
    """The numbers every run kind reports; a kind's summary adds its own fields (extra keys are kept).

    ``failures`` and ``incomplete`` are the outcome accounting: a run whose items all finished has
    neither, and only such a run exits 0.
    """

    model_config = ConfigDict(extra="allow")

    kind: str = ""
    run_dir: str = ""
    llm_calls: int = 0
    cache_hits: int = 0
    wall_time_s: float = 0.0
    roles: dict[str, Any] = Field(default_factory=dict)  # calls and cache hits per model role
    failures: list[FailedItem] = Field(default_factory=list)
    incomplete: int = 0
    unscored: int = 0  # items asked for that have no score (failed, missing, or never judged)
    retried: int = 0  # failed items of earlier runs that this run did again
    recovered: int = 0  # of those, the ones that finished this time

    @property
    def complete(self) -> bool:
        """True when every item of the run finished and every item asked for has its score."""
        return not self.failures and not self.incomplete and not self.unscored

    @property
    def exit_code(self) -> int:
        """0 when every item finished, else :data:`EXIT_INCOMPLETE`."""
        return EXIT_OK if self.complete else EXIT_INCOMPLETE

    def outcome_line(self) -> str | None:
        """One line counting failed (and of those, permanent), incomplete, retried and recovered items (None
        when there are none); it says to run the command again only when that can change something."""
        retry = f"retried: {self.retried}, recovered: {self.recovered}" if self.retried else ""
        if self.complete:
            return retry or None
        permanent = sum(f.permanent for f in self.failures)
        parts = [f"{len(self.failures)} failed"] if self.failures else []
        parts += [f"{self.incomplete} incomplete"] if self.incomplete else []
        if parts:
            line = f"{' and '.join(parts)} items (listed in {self.run_dir or 'the run directory'})"
        else:  # every item ended, yet some have no score (a verdict lost, say)
            line = f"{self.unscored} items without a score (the scores are incomplete)"
        if permanent:
            line += f"; {permanent} permanent (the model's stored reply is unusable: not retried)"
        if permanent < len(self.failures) or self.incomplete or not parts:
            line += "; run the same command again to resume"
        return line + (f" ({retry})" if retry else "")

    # --- display: a notebook's last expression, print(), rich -------------------------------------------
    def table(self) -> SummaryTable:
        """What a notebook, ``print`` or rich shows for this summary: the kind's headline as plain text (a
        kind with scores shows them; here, the counts every run has)."""
        return SummaryTable(
            f"{self.kind or 'run'} · {self.run_dir}", ["", "value"],
            [["LLM calls", str(self.llm_calls)], ["cache hits", str(self.cache_hits)],
             ["wall time", f"{self.wall_time_s:.1f} s"], ["failed items", str(len(self.failures))],
             ["incomplete items", str(self.incomplete)]],
        )

    def _repr_html_(self) -> str:
        table = self.table()
        head = "".join(f"<th>{html.escape(name)}</th>" for name in table.columns)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row) + "</tr>"
                       for row in table.rows)
        notes = "".join(f"<p>{html.escape(line)}</p>" for line in self._notes())
        return (f"<table><caption>{html.escape(table.title)}</caption><thead><tr>{head}</tr></thead>"
                f"<tbody>{body}</tbody></table>{notes}")

    def __repr__(self) -> str:
        table = self.table()
        widths = [max(len(row[i]) for row in [table.columns, *table.rows]) for i in range(len(table.columns))]
        lines = [f"{type(self).__name__}: {table.title}"]
        for row in [table.columns, *table.rows]:
            cells = [cell.ljust(width) if i == 0 else cell.rjust(width)
                     for i, (cell, width) in enumerate(zip(row, widths, strict=True))]
            lines.append("  ".join(cells).rstrip())
        return "\n".join([*lines, *self._notes()])

    __str__ = __repr__  # print(summary): the same table

    def __rich__(self) -> Any:
        from rich.table import Table  # only when rich draws the summary
        from rich.text import Text

        table = self.table()
        out = Table(title=Text(table.title), caption=Text("\n".join(self._notes())) if self._notes() else None)
        for i, name in enumerate(table.columns):
            out.add_column(Text(name), justify="left" if i == 0 else "right")
        for row in table.rows:
            out.add_row(*(Text(cell) for cell in row))
        return out

    def _notes(self) -> list[str]:
        """The outcome line under the table, when there is one (failed, incomplete, retried items)."""
        line = self.outcome_line()
        return [line] if line else []


@dataclass(frozen=True)
class ProgressEvent:
    """Progress of one stage of a run: ``done`` of ``total`` items (``total`` None while unknown), of which
    ``reused`` were finished by an earlier run in the same directory and are not done again."""

    stage: str
    done: int
    total: int | None
    reused: int = 0


ProgressHandler = Callable[[ProgressEvent], None]
S = TypeVar("S", bound=Summary)
P = ParamSpec("P")
T = TypeVar("T")


COLLECTOR_THRESHOLDS = (50_000, 20, 20)
"""Python's cyclic garbage collector for a long batch run (:func:`settle_collector`): a young-generation pass
after 50,000 new container objects instead of 700, so that full passes over every open persona graph, which
stop the event loop, come rarely (at 2,048 calls in flight they were half the CPU per call:
docs/benchmarks.md#throughput)."""


def settle_collector() -> None:
    """Readies this process's garbage collector for a long run: everything alive now (imports, models,
    prompts) is frozen out of its passes, and passes come less often (:data:`COLLECTOR_THRESHOLDS`).
    For processes that exist to run batches (a CLI command, a Ray worker); a library caller keeps its own."""
    gc.freeze()
    gc.set_threshold(*COLLECTOR_THRESHOLDS)


class CancellingExecutor(ThreadPoolExecutor):
    """An event loop's default executor (``asyncio.to_thread``) that, when the loop shuts it down at the end
    of ``asyncio.run``, drops the work not started yet and waits at most :data:`EXIT_WAIT_S` for the work in
    progress: after a cancelled run, a queue of likelihood passes (seconds of CPU each), or a first import of
    torch on a busy machine, would otherwise hold the caller long after every result was saved. A thread
    still busy then finishes on its own; nothing waits for it."""

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        super().shutdown(wait=False, cancel_futures=True)
        if wait:
            deadline = time.monotonic() + EXIT_WAIT_S
            for thread in list(self._threads):
                thread.join(max(0.0, deadline - time.monotonic()))


EXIT_WAIT_S = 2.0
"""How long an interrupted run waits for work already running on its worker threads before it returns."""


class MainTask:
    """A coroutine as the main task of the event loop that runs it (``asyncio.run(main())``), which a signal
    handler or another thread can cancel: the run then ends as Ctrl-C ends it, every ``finally`` run. Its
    loop's default executor is a :class:`CancellingExecutor`."""

    def __init__(self, coroutine: Coroutine[Any, Any, T]) -> None:
        self.coroutine = coroutine
        self.started = threading.Event()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.task: asyncio.Task[Any] | None = None

    async def __call__(self) -> Any:
        self.loop, self.task = asyncio.get_running_loop(), asyncio.current_task()
        self.loop.set_default_executor(CancellingExecutor())
        self.started.set()
        return await self.coroutine

    def cancel_soon(self) -> bool:
        """Cancels the task if it runs; False when it has not started or has ended."""
        if self.loop is None or self.task is None or self.task.done() or self.loop.is_closed():
            return False
        try:
            self.loop.call_soon_threadsafe(self.task.cancel)
        except RuntimeError:  # the loop closed in between: the run ended
            return False
        return True

    def cancel(self) -> None:
        """Cancels the task from another thread, once it runs (a run cancelled before its loop started would
        run on)."""
        while not self.started.wait(0.05):
            pass
        self.cancel_soon()


def run_to_completion(coroutine: Coroutine[Any, Any, T]) -> T:
    """Runs a coroutine to completion from sync code: on this thread, or on a worker thread with an event
    loop of its own when this thread already runs one (a notebook cell, an async test calling sync code),
    where ``asyncio.run`` would refuse.

    An interrupt stops it within moments either way (Ctrl-C; a notebook's Stop button, which interrupts the
    waiting thread): the run's task is cancelled, so no further model call is sent, every ``finally`` runs
    and the run store keeps each finished item (the same call resumes), and ``KeyboardInterrupt`` is
    raised. A second interrupt while the run winds down raises at once."""
    main = MainTask(coroutine)
    try:
        asyncio.get_running_loop()
        in_a_loop = True
    except RuntimeError:
        in_a_loop = False
    if not in_a_loop:  # outside the except block: the run's own errors are not chained to this one
        return asyncio.run(main())  # Ctrl-C cancels its main task: the same way out
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="personagraph-sync")
    try:
        future = pool.submit(asyncio.run, main())
        try:
            return future.result()
        except KeyboardInterrupt:
            main.cancel()
            concurrent.futures.wait([future])  # the run's finally blocks: finished items are committed
            raise KeyboardInterrupt from None
    finally:
        pool.shutdown(wait=False)


def synchronous(func: Callable[P, Coroutine[Any, Any, T]], name: str | None = None) -> Callable[P, T]:
    """The sync twin of an async function: same arguments, run to completion by :func:`run_to_completion`
    (so it works in a notebook cell too, and an interrupt stops it)."""

    @functools.wraps(func)
    def twin(*args: P.args, **kwargs: P.kwargs) -> T:
        return run_to_completion(func(*args, **kwargs))

    twin.__name__ = twin.__qualname__ = name or f"{func.__name__}_sync"
    twin.__doc__ = f"Synchronous :func:`{func.__name__}` (same arguments). {func.__doc__ or ''}"
    return twin


def redact_url(url: str) -> str:
    """A connection URL without its password or query (safe for meta, logs and errors)."""
    parts = urlsplit(url)
    if parts.password:
        netloc = f"{parts.username or ''}:***@{parts.hostname or ''}" + (
            f":{parts.port}" if parts.port else ""
        )
        parts = parts._replace(netloc=netloc)
    return urlunsplit(parts._replace(query=""))


def without_secrets(value: Any) -> Any:
    """``value`` (JSON data) without fields named like secrets and with passwords cut out of URLs."""
    if isinstance(value, dict):
        return {
            k: without_secrets(v)
            for k, v in value.items()
            if not any(word in str(k).lower() for word in _SECRET_WORDS)
        }
    if isinstance(value, list):
        return [without_secrets(v) for v in value]
    if isinstance(value, str) and "://" in value and "@" in value:
        return redact_url(value)
    return value


class Run:
    """The context of one run of one kind in one run directory (see the module docstring).

    Args:
        kind: the run kind (``eval``, ``simulate``, …); a directory holding another kind is refused.
        run_dir: the run directory (created if needed; reused to resume).
        config: the run's config, recorded without secrets under ``config_key``.
        unit: for kinds whose run directory holds several units (model × mode, …): this run's unit; its
            config is recorded under ``config:<unit>`` and :meth:`finish_unit` gathers the units' summaries.
        config_key: the meta key of the config (default ``config``, or ``config:<unit>``).
        exclude: config fields left out of the record (large inputs recorded elsewhere).
        on_progress: receives a :class:`ProgressEvent` whenever a stage's total or count changes.
        summary_file: the file in ``run_dir`` that :meth:`finish` writes.
        write_behind: open the store with batched commits (see :class:`~personagraph.store.RunStore`).
        retry_failed: a resumed run does the items that failed before again (False: keeps them failed).
        retry_permanent: permanent failures are retried too (their model calls are sent again; the model
            layer does that with ``ModelSettings.retry_permanent``).

    A start refused before anything was stored (a bad endpoint, a key variable not set, a checkpoint URL
    that does not connect) leaves nothing behind: the files this run created are removed again.
    """

    def __init__(
        self,
        kind: str,
        run_dir: str | Path,
        config: BaseModel,
        *,
        unit: str | None = None,
        config_key: str | None = None,
        exclude: set[str] | None = None,
        on_progress: ProgressHandler | None = None,
        summary_file: str = "summary.json",
        write_behind: bool = False,
        retry_failed: bool = True,
        retry_permanent: bool = False,
    ) -> None:
        self.kind = kind
        self.retry_failed = retry_failed
        self.retry_permanent = retry_permanent and retry_failed
        self._retrying: set[tuple[str, str]] = set()
        self.run_dir = Path(run_dir)
        self.config = config
        self.meter = Meter()
        self.summary_file = summary_file
        self.unit = unit
        self._config_key = config_key or (f"config:{unit}" if unit else "config")
        self._exclude = exclude or set()
        self._write_behind = write_behind
        self._on_progress = on_progress
        self._done: dict[str, int] = {}
        self._totals: dict[str, int | None] = {}
        self._reused: dict[str, int] = {}
        self._started = time.perf_counter()
        self._store: RunStore | None = None

    @property
    def store(self) -> RunStore:
        if self._store is None:
            raise RuntimeError("Run.store is open only inside `with Run(...)`")
        return self._store

    def __enter__(self) -> Run:
        self._store = RunStore(self.run_dir, write_behind=self._write_behind)  # a refusal leaves nothing
        try:
            held = self._store.get_meta("kind")
            if held not in (None, self.kind):
                raise PersonagraphError(
                    f"--run-dir {self.run_dir}: holds a run of kind {held!r}, not {self.kind}; "
                    "use another directory"
                )
            self._store.set_meta("kind", self.kind)
            config = self.config.model_dump(mode="json", exclude=self._exclude)
            self._store.set_meta(self._config_key, without_secrets(config))
            self._store.set_meta("versions", library_versions())
            self._store.set_meta("weights", weight_hashes(config))
        except BaseException as exc:
            self._close(exc)
            raise
        self._started = time.perf_counter()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._store is not None:
            try:  # the data files this process read: known only now (provenance.data_file_hashes)
                if not isinstance(exc, PersonagraphError):
                    self._store.set_meta("data_files", data_file_hashes(self._store.get_meta("data_files")))
                    self._store.set_meta("weights", {**(self._store.get_meta("weights") or {}),
                                                     **scoring_weight_hashes()})
            finally:
                self._close(exc)

    def _close(self, exc: BaseException | None) -> None:
        """Closes the store; after a refused start that stored nothing (bad input found once the store was
        open), removes the files this run created (:meth:`~personagraph.store.RunStore.discard`, under the
        run lock: never another process's), so that the refusal leaves nothing behind."""
        store, self._store = self._store, None
        if store is None:
            return
        blank = False
        if isinstance(exc, PersonagraphError) and store.created:
            try:
                blank = store.is_blank()
            except PersonagraphError:
                blank = False
        if blank:
            store.discard()
        else:
            store.close()

    def record(self, **meta: Any) -> None:
        """Records more meta (prompt and rubric versions, data-file hashes, sources), without secrets."""
        for key, value in meta.items():
            self.store.set_meta(key, without_secrets(value))

    # --- progress -------------------------------------------------------------------------------------
    def expect(self, stage: str, total: int | None, reused: int = 0) -> None:
        """Announces a stage and how many items it has (None: not known yet), of which ``reused`` are
        already finished in the run directory (counted done from the start: a finished run run again
        shows every stage complete, not at 0)."""
        self._totals[stage] = total
        self._reused[stage] = reused
        self._done[stage] = self._done.get(stage, 0) + reused
        self._emit(stage)

    def advance(self, stage: str, n: int = 1, *, reused: bool = False) -> None:
        """Counts ``n`` finished items of ``stage`` (``reused``: finished by an earlier run, not done now)."""
        self._done[stage] = self._done.get(stage, 0) + n
        if reused:
            self._reused[stage] = self._reused.get(stage, 0) + n
        self._emit(stage)

    def _emit(self, stage: str) -> None:
        if self._on_progress is not None:
            self._on_progress(ProgressEvent(stage, self._done.get(stage, 0), self._totals.get(stage),
                                            self._reused.get(stage, 0)))

    # --- retry on resume -------------------------------------------------------------------------------
    def pending(self, failures: list[FailedItem] | None) -> bool:
        """Whether this run does an item (or a unit of items) now, given the failures of its stored record:
        ``None`` (no record yet) → yes; failed items that are not permanent (or any, with ``retry_permanent``)
        → yes when retrying (they count as retried), else they stay failed; only permanent failures, or ``[]``
        (finished) → no."""
        if failures is None:
            return True
        if self.retry_failed and any(self.retries(f) for f in failures):
            self.retrying(failures)
            return True
        return False

    def retries(self, failure: FailedItem) -> bool:
        """Whether this run retries a failed item: not a permanent one unless ``retry_permanent``."""
        return self.retry_failed and (self.retry_permanent or not failure.permanent)

    def retrying(self, failures: Iterable[FailedItem]) -> None:
        """Counts earlier failed items that this run does again (see :meth:`pending`); a permanent failure is
        not retried (unless ``retry_permanent``), so it is not counted."""
        self._retrying.update(f.key for f in failures if self.retries(f))

    # --- the end --------------------------------------------------------------------------------------
    def finish(self, summary: S, *, write: bool = True) -> S:
        """Fills the numbers every summary has (calls, wall time, retried and recovered items) and writes it
        to :attr:`summary_file` (``write=False``: the kind writes its own file, e.g. one that gathers
        several units). Retried and recovered items are added to those a part of the run with its own
        :class:`Run` already counted there (eval's judge check)."""
        still = {f.key for f in summary.failures}
        summary.retried += len(self._retrying)
        summary.recovered += len(self._retrying - still)
        summary.kind = self.kind
        summary.run_dir = str(self.run_dir)
        summary.llm_calls = self.meter.total_calls
        summary.cache_hits = self.meter.total_cache_hits
        summary.wall_time_s = round(time.perf_counter() - self._started, 3)
        summary.roles = self.meter.as_dict()
        if write:
            self.write_json(self.summary_file, summary.model_dump(mode="json"))
        return summary

    def finish_unit(self, summary: S, *, exclude: Any = None) -> S:
        """:meth:`finish` for kinds whose run directory holds several units (model × mode, …): records this
        unit's summary (meta ``summary:<unit>``, without ``exclude``) and writes :attr:`summary_file` with
        every unit's, by unit."""
        unit = self.unit or "default"
        self.finish(summary, write=False)
        self.store.set_meta(f"summary:{unit}", summary.model_dump(mode="json", exclude=exclude))
        units = self.store.get_meta(f"{self.kind}_units", [])
        if unit not in units:
            units = [*units, unit]
            self.store.set_meta(f"{self.kind}_units", units)
        self.write_json(self.summary_file, {name: self.store.get_meta(f"summary:{name}") for name in units})
        return summary

    def write_json(self, name: str, data: Any) -> Path:
        """Writes ``data`` as indented UTF-8 JSON to ``name`` in the run directory, atomically and never
        through a link (:func:`~personagraph.files.write_atomic`: a link planted there is replaced)."""
        path = self.run_dir / name
        try:
            return write_atomic(path, json.dumps(data, indent=2, ensure_ascii=False))
        except OSError as exc:
            raise PersonagraphError(
                f"{path}: cannot write ({exc.strerror or exc}); the results are in {self.run_dir / STORE_FILE} — "
                "run the same command again to write it"
            ) from None


class HasId(Protocol):
    id: str


ItemT = TypeVar("ItemT", bound=HasId)


async def generate_pending(
    run: Run,
    items: Sequence[ItemT],
    generate: Callable[[ItemT], Awaitable[BaseModel | dict[str, Any]]],
    *,
    kind: str,
    unit: str,
    model: str,
    stage: str,
) -> list[dict[str, Any]]:
    """Generates, concurrently, every one of ``items`` that :meth:`Run.pending` says has work (no stored
    ``kind`` record in ``unit`` yet, or a failed one to retry), storing each record as it finishes (id
    ``unit|item id``) and advancing ``stage``; a failed record's stage is ``generations``.

    Returns:
        The stored records of ``items`` (this run's and earlier ones), in ``items``' order.
    """
    stored = {record["id"]: record for record in run.store.records(kind, unit=unit)}
    todo = [item for item in items if run.pending(record_failures(GENERATIONS, stored.get(item.id), model))]
    run.expect(stage, len(items), reused=len(items) - len(todo))

    async def one(item: ItemT) -> None:
        run.store.put(kind, f"{unit}|{item.id}", await generate(item), unit=unit)
        run.advance(stage)

    await asyncio.gather(*(one(item) for item in todo))
    stored = {record["id"]: record for record in run.store.records(kind, unit=unit)}
    return [stored[item.id] for item in items if item.id in stored]
