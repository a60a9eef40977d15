"""What every command shares: the console, the one error path (one line, exit 2), model flags."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import signal
import threading
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import UnionType
from typing import Any, TypeVar, Union, get_args, get_origin, get_type_hints

import typer
from pydantic import BaseModel
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text
from typer.core import TyperArgument
from typer.models import ArgumentInfo, OptionInfo

from personagraph.errors import PersonagraphError
from personagraph.judges.protocols import API_PROTOCOL, EMBEDDED_PROTOCOL, PROTOCOLS, SCRIPTED_PROTOCOL
from personagraph.models import ModelSettings
from personagraph.models.retry import set_wait_notice
from personagraph.models.settings import DEFAULT_TIMEOUT_S, MAX_TIMEOUT_S
from personagraph.redact import redact_text
from personagraph.runs.base import (
    ConfigError,
    MainTask,
    ProgressEvent,
    ProgressHandler,
    Summary,
    settle_collector,
)

T = TypeVar("T")
console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False, emoji=False)


@dataclass
class _State:
    verbose: bool = False
    quiet: bool = False


state = _State()


def fail(message: str) -> typer.Exit:
    """Prints one error line and returns the exit to raise (code 2)."""
    line = Text("error: ", style="bold red")
    line.append(redact_text(" ".join(message.split())))  # plain text: paths and model output may contain [markup]
    err_console.print(line, soft_wrap=True)
    return typer.Exit(code=2)


EXIT_SIGINT = 130
EXIT_SIGTERM = 143  # 128 + SIGTERM, what a shell reports for a process ended by it
MAX_COUNT = 10**9  # the upper bound of a flag counting records, items or memories ("only the first N")
MAX_TOKENS = 8192  # the upper bound of a flag giving a reply's token budget
MAX_BERT_LAYERS = 48  # the most layers of a BERTScore model (the packaged one has 6: checked when it loads)


class _Terminated:
    """SIGTERM (``timeout``, systemd, ``docker stop``, Kubernetes) handled like Ctrl-C, and remembered (exit
    143). The first one cancels the command's main task, as ``asyncio.run`` does on Ctrl-C: every ``finally``
    runs and the run store commits its pending rows on the way out. It does not depend on SIGINT's handler
    (a job a script starts with ``&`` inherits SIGINT ignored) and never raises an exception at whatever line
    the main thread is on: a ``KeyboardInterrupt`` landing just after a lock was taken (the store's, the
    scorer's) can leave it held, and the process then waits for it forever. A second SIGTERM, or one
    outside a running event loop (a sync command), interrupts at once."""

    def __init__(self) -> None:
        self.seen = False
        self.main: MainTask | None = None  # the command's main task, while it runs

    def __call__(self, signum: int, frame: Any) -> None:
        first, self.seen = not self.seen, True
        if first and self.main is not None and self.main.cancel_soon():
            return
        raise KeyboardInterrupt

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Runs ``coroutine`` to completion in a new event loop whose main task a SIGTERM cancels; a run
        cancelled by it ends as Ctrl-C's does (``KeyboardInterrupt``, once every ``finally`` ran)."""

        async def settled() -> T:
            settle_collector()  # a command's process exists to run it
            return await coroutine

        self.main = MainTask(settled())
        try:
            return asyncio.run(self.main())
        except asyncio.CancelledError:
            if self.seen:
                raise KeyboardInterrupt from None
            raise
        finally:
            self.main = None

    @contextlib.contextmanager
    def installed(self) -> Iterator[_Terminated]:
        if threading.current_thread() is not threading.main_thread():
            yield self  # signals reach the main thread only
            return
        previous = signal.signal(signal.SIGTERM, self)
        try:
            yield self
        finally:
            signal.signal(signal.SIGTERM, previous)


def busy_threads() -> list[threading.Thread]:
    """The threads besides the main one that would keep the interpreter from exiting (not daemons)."""
    return [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon and t.is_alive()]


def _wait_notice(line: str) -> None:
    """A long wait before a retry, on stderr (also with --quiet: a run that waits must not look hung)."""
    err_console.print(Text(redact_text(" ".join(line.split()))), soft_wrap=True)


def run(work: Callable[[], Coroutine[Any, Any, T]] | Callable[[], T]) -> T:
    """Runs a command body (sync, or an async function run to completion) behind the one error path.

    PersonagraphError becomes one line and exit code 2 (a :class:`ConfigError` names the field's flag); a
    returned :class:`Summary` prints its outcome line on stderr (failed and incomplete items, retried and
    recovered ones) and, with failed, incomplete or unscored items, exits with its ``exit_code`` (3); Ctrl-C
    exits 130 and SIGTERM 143, both without a traceback, once the run store has committed every finished
    item; any other exception is a bug: one line and exit 1, or the traceback with ``--verbose``. A model
    call that waits long before a retry (a 429 with a long Retry-After) says so on stderr.
    """
    set_wait_notice(_wait_notice)
    terminated = _Terminated()
    try:
        with terminated.installed():
            result = work()
            if asyncio.iscoroutine(result):
                result = terminated.run(result)
    except ConfigError as exc:
        raise fail(f"{flag_for(exc.field)}: {exc.reason}") from None
    except PersonagraphError as exc:
        raise fail(str(exc)) from None
    except KeyboardInterrupt as exc:  # a command may say what it kept (``KeyboardInterrupt(text)``)
        what = "terminated (SIGTERM)" if terminated.seen else "interrupted"
        kept = str(exc) or "finished items are saved; run the same command again to resume"
        err_console.print(f"{what}: {kept}", soft_wrap=True)
        raise typer.Exit(code=EXIT_SIGTERM if terminated.seen else EXIT_SIGINT) from None
    except (typer.Exit, typer.Abort):
        raise
    except Exception as exc:  # a bug, not bad input: one line unless --verbose asks for the traceback
        if state.verbose:
            raise
        err_console.print(Text(redact_text(f"internal error: {type(exc).__name__}: {exc} (run with --verbose for "
                                           "the traceback and report it)"), style="bold red"), soft_wrap=True)
        raise typer.Exit(code=1) from None
    if isinstance(result, Summary):
        if (line := result.outcome_line()) is not None:
            err_console.print(Text(line), soft_wrap=True)
        if result.exit_code:
            raise typer.Exit(code=result.exit_code)
    return result  # type: ignore[return-value]


# config fields whose flag is not the field's name in --kebab-case (repeatable flags are singular)
_FLAGS = {"personas": "--persona", "models": "--model", "judges": "--judge", "agents": "--agent",
          "variants": "--variant", "rubric_files": "--rubric", "from_run": "--from"}


def default_of(config: type[BaseModel], field: str) -> object:
    """A config field's default, for the help of a flag that leaves the value to the config when not given."""
    return config.model_fields[field].default


def flag_for(field: str) -> str:
    """The CLI flag of a config field: ``questions_per_task`` → ``--questions-per-task``."""
    return _FLAGS.get(field, "--" + field.replace("_", "-"))


BASE_URL_OPTION = typer.Option(None, "--base-url", help="OpenAI-compatible endpoint for openai: specs "
                               "(default $OPENAI_BASE_URL).")
API_KEY_OPTION = typer.Option(None, "--api-key", help="API key for openai: specs (default $OPENAI_API_KEY). "
                              "Never written to the run directory.")
ENDPOINT_OPTION = typer.Option(
    [], "--endpoint", metavar="NAME=URL[,key-env=VAR][,concurrency=N]",
    help="A named OpenAI-compatible endpoint for openai@NAME:MODEL specs (repeatable: e.g. agent on vLLM, judges "
    "on another server). key-env names the variable holding its key (none: no key is sent); concurrency caps "
    "its requests in flight (default --concurrency or 8). Keys are never written to the run directory.",
)
RETRY_FAILED_OPTION = typer.Option(
    True, "--retry-failed/--no-retry-failed",
    help="On resume, retry the items that failed before (default) or keep them failed.",
)
RETRY_PERMANENT_OPTION = typer.Option(
    False, "--retry-permanent",
    help="On resume, also retry the items whose model reply was complete but never fit the format (permanent "
    "failures): their calls are sent again past the response cache.",
)
TIMEOUT_OPTION = typer.Option(
    DEFAULT_TIMEOUT_S, "--timeout", min=1, max=MAX_TIMEOUT_S,
    help="Seconds each request to an API endpoint may take before it is retried (a notice says when one is "
         "still waiting).",
)
JUDGE_PROTOCOL_OPTION = typer.Option(
    None, "--judge-protocol",
    help=f"How judges are asked (judges/protocols.py): {', '.join(PROTOCOLS)}. Default: {API_PROTOCOL} for "
    f"openai: judges (their own reading of the rubric), {EMBEDDED_PROTOCOL} for the embedded local: judges, "
    f"{SCRIPTED_PROTOCOL} for test: scripts.",
)


def readable_help(app: typer.Typer) -> None:
    """Gives every option of ``app`` and its sub-apps that names none a metavar people read (TEXT, INTEGER,
    FLOAT, PATH): typer prints raw type names (``<list[str]>``, ``<int range>``). Flags get none; an
    argument is named by its metavar (its name in capitals: ``QUESTION``, not ``{question} <str>``)."""
    apps = [app]
    while apps:
        current = apps.pop()
        apps += [group.typer_instance for group in current.registered_groups if group.typer_instance]
        for command in current.registered_commands:
            hints = get_type_hints(command.callback)
            for name, parameter in inspect.signature(command.callback).parameters.items():
                if isinstance(parameter.default, OptionInfo) and parameter.default.metavar is None:
                    parameter.default.metavar = _metavar(hints.get(name))
                elif isinstance(parameter.default, ArgumentInfo) and parameter.default.metavar is None:
                    parameter.default.metavar = name.upper()  # typer adds "..." for several


# typer writes an argument's type after its name in the help ("RUN_A <path>"); the metavar and the help
# say what it is, so arguments show no type (typer's options show their metavar instead of a type)
TyperArgument.display_type_rich = lambda self, ctx: None  # type: ignore[method-assign,assignment]


def _metavar(annotation: Any) -> str | None:
    """TEXT, INTEGER, FLOAT or PATH for an option's annotation (``T | None`` and ``list[T]`` as T)."""
    while get_origin(annotation) in (list, Union, UnionType):
        annotation = next(a for a in get_args(annotation) if a is not type(None))
    if annotation is bool:
        return None
    return {int: "INTEGER", float: "FLOAT", Path: "PATH"}.get(annotation, "TEXT")


def model_settings(base_url: str | None, api_key: str | None, endpoints: list[str] | None = None,
                   **fields: Any) -> ModelSettings:
    """Settings shared by a command's roles, from the common flags (``--endpoint`` values as given)."""
    key = api_key or os.environ.get("OPENAI_API_KEY")  # read here so that the key travels to Ray workers
    try:
        return ModelSettings(base_url=base_url, api_key=key, endpoints=endpoints or [], **fields)
    except ValueError as exc:
        first = exc.errors()[0]
        raise ConfigError(str(first["loc"][0]), first["msg"].removeprefix("Value error, ")) from None  # names the flag


def cut_off_note(max_tokens: int) -> str:
    """What ``ask`` and ``chat`` print under a reply that used its whole ``--max-tokens``: the reader should
    not take a cut answer for the whole one."""
    return f"(cut off at the {max_tokens}-token limit: --max-tokens raises it)"


PROGRESS_INTERVAL_S = 10.0
"""Seconds between two plain progress lines when the output is not a terminal (the environment variable
``PERSONAGRAPH_PROGRESS_INTERVAL`` overrides it): a CI log, ``| tee`` or ``nohup`` shows the run moving
instead of nothing until it ends."""


class _Progress(Progress):
    """A progress display that leaves the terminal to the error line when a command is refused, and that
    prints plain lines (each stage's done/total and ETA) at a steady interval when the console is not a
    terminal, where rich draws the bars only once, at the end."""

    def start(self) -> None:
        super().start()
        self._stopped = threading.Event()
        self._ticker: threading.Thread | None = None
        if not self.disable and not self.console.is_terminal:
            interval = float(os.environ.get("PERSONAGRAPH_PROGRESS_INTERVAL") or PROGRESS_INTERVAL_S)
            self._ticker = threading.Thread(target=self._tick, args=(max(interval, 0.05),), daemon=True,
                                            name="personagraph-progress")
            self._ticker.start()

    def _tick(self, interval: float) -> None:
        while not self._stopped.wait(interval):
            if line := self.plain_line():
                self.console.print(line, markup=False, highlight=False, soft_wrap=True)

    def plain_line(self) -> str:
        """The stages as one line: ``progress 0:30 · answers 7/15 ETA 0:42 · verdicts 2/15 ETA 1:10``."""
        with self._lock:
            tasks = [task for task in self.tasks if task.visible]
        if not tasks:
            return ""
        elapsed = max((task.elapsed or 0.0) for task in tasks)
        parts = [f"progress {_clock(elapsed)}"]
        for task in tasks:
            total = "?" if task.total is None else f"{task.total:.0f}"
            part = f"{task.description.strip()} {task.completed:.0f}/{total}"
            if task.finished:
                part += " done"
            elif task.time_remaining is not None:
                part += f" ETA {_clock(task.time_remaining)}"
            parts.append(part)
        return " · ".join(parts)

    def stop(self) -> None:
        self._stop_ticker()
        super().stop()

    def _stop_ticker(self) -> None:
        if getattr(self, "_ticker", None) is not None:
            self._stopped.set()
            self._ticker.join()  # type: ignore[union-attr]
            self._ticker = None

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if isinstance(exc, PersonagraphError):  # bad input found once the bars were up: one line, no bars
            self._stop_ticker()
            self.live.transient = True
            self.live.stop()  # not Progress.stop, which ends a non-terminal display with an empty line
            return
        super().__exit__(exc_type, exc, tb)


def _clock(seconds: float) -> str:
    """``1:05`` (minutes:seconds) or ``1:02:05``."""
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def progress_display(*, label_width: int = 10, transient: bool = False) -> Progress:
    """The progress display every long command shows, on stderr: label, bar, done/total, elapsed time and ETA
    (off with --quiet; plain lines where stderr is not a terminal)."""
    return _Progress(
        TextColumn(f"{{task.description:<{label_width}}}", markup=False),  # labels hold model names, ids
        BarColumn(bar_width=30),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(compact=True),
        console=err_console,  # progress is no result: `personagraph eval … > results.txt` keeps only results
        disable=state.quiet,
        transient=transient,
    )


def progress_bars(progress: Progress) -> ProgressHandler:
    """Draws a run's progress events on ``progress``: one bar per stage, in order of appearance."""
    bars: dict[str, TaskID] = {}

    def on_progress(event: ProgressEvent) -> None:
        label = f"{event.stage} ({event.reused} reused)" if event.reused else event.stage
        if event.stage not in bars:
            bars[event.stage] = progress.add_task(label, total=event.total)
        progress.update(bars[event.stage], completed=event.done, total=event.total, description=label)

    return on_progress
