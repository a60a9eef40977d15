"""``personagraph report``: one self-contained HTML report from one or more run directories."""

from __future__ import annotations

from pathlib import Path

import typer

from personagraph.cli._common import console, run, state


def report_command(
    run_dirs: list[Path] = typer.Argument(..., metavar="RUN_DIR", help="Run directories (eval, simulate, "
                                          "memory, metric runs); several are shown side by side."),
    output: Path = typer.Option(Path("report.html"), "--output", "-o", help="The HTML file to write."),
    title: str | None = typer.Option(None, "--title", help="Page title (default: the run names)."),
    lowest: int = typer.Option(10, "--lowest", min=0, max=500, help="How many lowest-scored items to show."),
) -> None:
    """Write an HTML report: headline table, radar charts, score distributions, drift, costs, config."""

    def body() -> None:
        # the report stack (plotly, scipy) loads on first use, so the CLI starts fast
        from personagraph.report.html import write_report

        path = write_report(run_dirs, output, title=title, lowest=lowest)
        if not state.quiet:
            size = path.stat().st_size / 1e6
            console.print(f"report: {path} ({size:.1f} MB, self-contained; open it in a browser)", soft_wrap=True,
                          markup=False)

    run(body)


def register(app: typer.Typer) -> None:
    app.command("report")(report_command)
