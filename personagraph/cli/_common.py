"""What every command shares: the console, the one error path (one line, exit 2), model flags."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from personagraph.errors import PersonagraphError
from personagraph.models import ModelSettings
from personagraph.redact import redact_text

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


def run(work: Callable[[], Coroutine[Any, Any, T]] | Callable[[], T]) -> T:
    """Runs a command body (sync, or an async function run to completion) behind the one error path.

    PersonagraphError becomes one line and exit code 2; Ctrl-C exits 130 without a traceback (every
    finished item is already in the run store); any other exception is a bug: one line and exit 1,
    or the traceback with ``--verbose``.
    """
    try:
        result = work()
        if asyncio.iscoroutine(result):
            return asyncio.run(result)
        return result  # type: ignore[return-value]
    except PersonagraphError as exc:
        raise fail(str(exc)) from None
    except KeyboardInterrupt:
        err_console.print("interrupted: finished items are saved; run the same command again to resume")
        raise typer.Exit(code=130) from None
    except (typer.Exit, typer.Abort):
        raise
    except Exception as exc:  # a bug, not bad input: one line unless --verbose asks for the traceback
        if state.verbose:
            raise
        err_console.print(Text(redact_text(f"internal error: {type(exc).__name__}: {exc} (run with --verbose for "
                                           "the traceback and report it)"), style="bold red"), soft_wrap=True)
        raise typer.Exit(code=1) from None


BASE_URL_OPTION = typer.Option(None, "--base-url", help="OpenAI-compatible endpoint for openai: specs "
                               "(default $OPENAI_BASE_URL).")
API_KEY_OPTION = typer.Option(None, "--api-key", help="API key for openai: specs (default $OPENAI_API_KEY). "
                              "Never written to the run directory.")


def model_settings(base_url: str | None, api_key: str | None, **fields: Any) -> ModelSettings:
    """Settings shared by a command's roles, from the common flags."""
    key = api_key or os.environ.get("OPENAI_API_KEY")
    try:
        return ModelSettings(base_url=base_url, api_key=key, **fields)
    except ValueError as exc:
        raise PersonagraphError(f"bad model setting: {exc.errors()[0]['loc'][0]}: {exc.errors()[0]['msg']}") from None


def progress_display(*, label_width: int = 10, transient: bool = False) -> Progress:
    """The progress display every long command shows: label, bar, done/total, elapsed (off with --quiet)."""
    return Progress(
        TextColumn(f"{{task.description:<{label_width}}}", markup=False),  # labels hold model names, ids
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=state.quiet,
        transient=transient,
    )
