"""``personagraph view``: a run's headline numbers in the terminal, or exported as CSV/JSON/Markdown."""

from __future__ import annotations

from pathlib import Path

import typer

from personagraph.cli._common import console, err_console, run
from personagraph.errors import PersonagraphError
from personagraph.files import check_output_file, write_output

FORMAT_HELP = "table (rich, default) or an export of the headline table: csv, json, markdown."


def check_export_options(format: str, output: Path | None, formats: tuple[str, ...]) -> None:
    """Refuses an unknown --format, -o without an export format, and an -o that must not be written — before
    any run is loaded."""
    if format not in ("table", *formats):
        raise PersonagraphError(f"--format {format!r}: choose one of table, {', '.join(formats)}")
    if output is not None:
        if format == "table":
            raise PersonagraphError(f"-o needs --format {', '.join(formats[:-1])} or {formats[-1]}")
        check_output_file(output, f"-o {output}", keep_run_files=True)


def write_export(text: str, output: Path | None) -> None:
    """Prints an export to stdout (unstyled) or writes it to ``output``."""
    if output is None:
        typer.echo(text, nl=False)
        return
    write_output(output, text, f"-o {output}", keep_run_files=True)
    err_console.print(f"wrote {output}", markup=False)


def view_command(
    run_dirs: list[Path] = typer.Argument(..., metavar="RUN_DIR", help="Run directory (or several)."),
    format: str = typer.Option("table", "--format", "-f", help=FORMAT_HELP),
    output: Path | None = typer.Option(None, "--output", "-o", help="Write the export here instead of stdout."),
) -> None:
    """Show a run's headline numbers: scores, CIs, refusals, judge agreement, tokens and cost."""

    def body() -> None:
        # the report stack (plotly, scipy) loads on first use, so the CLI starts fast
        from personagraph.report.headlines import headline_tables
        from personagraph.report.load import load_runs
        from personagraph.report.tables import EXPORT_FORMATS, export
        from personagraph.report.view import view

        check_export_options(format, output, EXPORT_FORMATS)
        runs = load_runs(list(run_dirs))
        if format == "table":
            for loaded in runs:
                console.print(view(loaded))
            return
        tables = headline_tables(runs)
        if not tables:
            raise PersonagraphError(f"{', '.join(str(r.path) for r in runs)}: no scores to export yet")
        write_export(export(tables, format), output)

    run(body)


def register(app: typer.Typer) -> None:
    app.command("view")(view_command)
