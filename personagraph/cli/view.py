"""``personagraph view``: a run's headline numbers in the terminal, or exported as CSV/JSON/Markdown."""

from __future__ import annotations

from pathlib import Path

import typer

from personagraph.cli._common import console, run
from personagraph.errors import PersonagraphError

FORMAT_HELP = "table (rich, default) or an export of the headline table: csv, json, markdown."


def write_export(text: str, output: Path | None) -> None:
    """Prints an export to stdout (unstyled) or writes it to ``output``."""
    if output is None:
        typer.echo(text, nl=False)
        return
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise PersonagraphError(f"-o {output}: cannot write ({exc.strerror})") from None
    console.print(f"wrote {output}", markup=False)


def view_command(
    run_dirs: list[Path] = typer.Argument(..., metavar="RUN_DIR...", help="Run directory (or several)."),
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

        if format not in ("table", *EXPORT_FORMATS):
            raise PersonagraphError(f"--format {format!r}: choose one of table, {', '.join(EXPORT_FORMATS)}")
        runs = load_runs(list(run_dirs))
        if format == "table":
            if output is not None:
                raise PersonagraphError("-o needs --format csv, json or markdown")
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
