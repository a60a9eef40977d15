"""The ``personagraph`` command. Each subcommand lives in its own module of this package and
registers itself through ``register(app)``; commands are thin: flags → config → API → render."""

from __future__ import annotations

import importlib
import logging
import os
import pkgutil
import sys

import typer
from typer._click.exceptions import ClickException, NoArgsIsHelpError, UsageError  # typer vendors click

from personagraph.cli._common import (
    EXIT_SIGINT,
    EXIT_SIGTERM,
    busy_threads,
    console,
    fail,
    readable_help,
    state,
)
from personagraph.version import __version__

app = typer.Typer(
    name="personagraph",
    help="Simulate and evaluate LLM persona agents with LangGraph.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help: rich markup ate "[ray]" in "personagraph[ray]"
)


def _version(value: bool) -> None:
    if value:
        console.print(f"personagraph {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log model calls and graph steps."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Only print results and errors."),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    state.verbose, state.quiet = verbose, quiet
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format="%(name)s: %(message)s")


for _module in sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")):
    importlib.import_module(f"{__name__}.{_module}").register(app)
readable_help(app)


def main() -> None:
    """Console-script entry point. A bad flag value is one error line and exit 2, like every other error
    (click would print a five-line usage box); help asked for, or no arguments, still prints help."""
    try:
        code = app(standalone_mode=False)
    except NoArgsIsHelpError as exc:
        exc.show()
        code = exc.exit_code
    except UsageError as exc:
        code = fail(exc.format_message()).exit_code
    except ClickException as exc:
        exc.show()
        code = exc.exit_code
    except typer.Abort:
        code = 1
    code = code if isinstance(code, int) else 0
    if code in (EXIT_SIGINT, EXIT_SIGTERM) and busy_threads():
        # Interrupted: every result is saved and the resume line printed, but a worker thread is still in
        # the middle of a computation nobody waits for; exiting normally would wait for it to end.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
