"""``personagraph compare RUN_A RUN_B``: per task difference B − A with a paired test on shared questions."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.text import Text

from personagraph.cli._common import console, err_console, run
from personagraph.cli.view import FORMAT_HELP, check_export_options, write_export
from personagraph.schemas import MAX_SEED


def compare_command(
    run_a: Path = typer.Argument(..., metavar="RUN_A", help="The baseline run directory."),
    run_b: Path = typer.Argument(..., metavar="RUN_B", help="The run to compare with it (may be RUN_A again, "
                                 "with --model-a/--model-b, to compare two models of one run)."),
    model_a: str | None = typer.Option(None, "--model-a", help="Model of RUN_A (needed when it has several)."),
    model_b: str | None = typer.Option(None, "--model-b", help="Model of RUN_B (needed when it has several)."),
    seed: int = typer.Option(0, min=0, max=MAX_SEED, help="Bootstrap seed."),
    format: str = typer.Option("table", "--format", "-f", help=FORMAT_HELP),
    output: Path | None = typer.Option(None, "--output", "-o", help="Write the export here instead of stdout."),
) -> None:
    """Is B really better than A? Per task: mean difference, paired bootstrap CI, Wilcoxon signed-rank p."""

    def body() -> None:
        # the report stack (plotly, scipy) loads on first use, so the CLI starts fast
        from personagraph.report.compare import compare_runs, comparison_json
        from personagraph.report.tables import EXPORT_FORMATS, export
        from personagraph.report.view import comparison_table

        check_export_options(format, output, EXPORT_FORMATS)
        comparison = compare_runs(run_a, run_b, model_a=model_a, model_b=model_b, seed=seed)
        for line in comparison.provenance:  # on stderr, so exports stay clean
            err_console.print(Text(f"warning: the runs differ in {line}", style="yellow"), soft_wrap=True)
        if format == "json":
            write_export(json.dumps(comparison_json(comparison), indent=2, ensure_ascii=False) + "\n", output)
            return
        if format != "table":
            write_export(export([comparison.table()], format), output)
            return
        console.print(comparison_table(comparison))
        lines = [(f"A = {comparison.model_a} in {run_a} · B = {comparison.model_b} in {run_b} · "
                  f"{comparison.shared} shared questions ({comparison.only_a} only in A, "
                  f"{comparison.only_b} only in B)")]
        lines += [f"note: {note}" for note in comparison.notes]
        lines.append(f"{comparison.scoring()} · 95% CI: paired bootstrap of the mean difference · W/L/T: "
                     "questions where B scored higher/lower/equal · p: Wilcoxon signed-rank, Holm-adjusted over "
                     "tasks (all tasks: its own) · 'B better' needs p < 0.05 and a CI above 0")
        for line in lines:
            console.print(Text(line, style="dim"))

    run(body)


def register(app: typer.Typer) -> None:
    app.command("compare")(compare_command)
