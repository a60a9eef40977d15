"""``personagraph score``: reference-based metrics for any JSONL of responses; shared metric flags/rendering."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from personagraph.cli._common import MAX_BERT_LAYERS, console, progress_bars, progress_display, run
from personagraph.embeddings import PACKAGED_MINILM
from personagraph.errors import PersonagraphError
from personagraph.files import read_jsonl
from personagraph.metrics.io import write_jsonl
from personagraph.metrics.nli import NLI_ENV
from personagraph.metrics.scoring import (
    METRICS,
    NEEDS,
    NLI_METRICS,
    ScoreConfig,
    ScoreItem,
    ScoreReport,
    parse_metrics,
    score_items,
)
from personagraph.runs.base import ProgressHandler

METRICS_HELP = (
    f"Comma-separated: {', '.join(METRICS)} (or all). Default: every metric the records have fields for; "
    "c_score/ue_score only when an NLI model is configured."
)
NLI_OPTION = typer.Option(None, "--nli-model", help=f"NLI classifier (local folder or cached id) for c_score "
                          f"and ue_score; default ${NLI_ENV}.")
BERTSCORE_MODEL_OPTION = typer.Option(None, "--bertscore-model", help=f"BERTScore model (local folder or cached "
                                      f"id); default the packaged {PACKAGED_MINILM}.")
BERTSCORE_LAYERS_OPTION = typer.Option(None, "--bertscore-layers", min=1, max=MAX_BERT_LAYERS, help="BERTScore layer (default: 6 for "
                                       "the packaged MiniLM, bert-score's table for known models).")
EMBEDDING_OPTION = typer.Option(None, "--embedding-model", help="Local sentence-embedding model folder (persona "
                                f"coverage, dense retrieval, the strategy classifier); default the packaged "
                                f"{PACKAGED_MINILM}.")
ROUGE_STEMMER_OPTION = typer.Option(False, "--rouge-stemmer", help="Porter-stem tokens before ROUGE.")
WORST_OPTION = typer.Option(False, "--failures-as-worst", help="Average failed (empty/unparsable) responses "
                            "into the means with their worst values (default: report them only as the "
                            "failure ratio).")


def choose_metrics(spec: str | None, have_reference: bool, have_persona: bool, nli_model: str | None) -> list[str]:
    """``--metrics`` as given, or by default every metric the data supports (NLI ones if configured)."""
    if spec:
        return parse_metrics(spec)
    nli = bool(nli_model or os.environ.get(NLI_ENV, "").strip())
    chosen = []
    for family in METRICS:
        needs = NEEDS[family]
        if ("reference" in needs and not have_reference) or ("persona" in needs and not have_persona):
            continue
        if family in NLI_METRICS and not nli:
            continue
        chosen.append(family)
    return chosen


def _fmt(value: float | None, digits: int = 4) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def render_report(report: ScoreReport, title: str | None = None) -> Table:
    """The summary table: mean of each number, corpus-level Dist, failure ratio."""
    basis = "all items, failures at worst values" if report.failures_as_worst else "successful items only"
    table = Table(title=title, caption=f"means over {basis}")
    table.add_column("metric")
    table.add_column("mean", justify="right")
    for key in report.keys:
        table.add_row(key, _fmt(report.means.get(key)))
    for key, value in report.corpus.items():
        table.add_row(key, _fmt(value))
    table.add_section()
    ratio = "—" if report.failure_ratio is None else f"{report.failure_ratio:.3f}"
    table.add_row("failure ratio", f"{ratio} ({report.failures}/{report.n})")
    return table


def print_models(report: ScoreReport) -> None:
    """Says which model produced which number."""
    for line in report.models.values():
        note = ""
        if line.startswith("bertscore:") and PACKAGED_MINILM in line:
            note = " — not comparable to roberta-large BERTScore figures"
        console.print(f"[dim]{line}{note}[/dim]")


def score_file(
    input_path: Path, output_path: Path, config: ScoreConfig,
    records: list[tuple[int, dict[str, Any]]] | None = None, on_progress: ProgressHandler | None = None,
) -> ScoreReport:
    """Scores a JSONL of ``{response, reference?, persona?, context?}`` and writes one line per record.

    Args:
        input_path: the JSONL file.
        output_path: where the input records, each with its numbers added, are written in order.
        config: metrics and models.
        records: the file's records if already read.
        on_progress: hears each metric as it finishes.
    """
    records = records if records is not None else read_jsonl(input_path, objects=True, allow_empty=False)
    items = [ScoreItem.from_record(record, f"{input_path} line {number}") for number, record in records]
    report = score_items(items, config, on_progress)
    out: list[dict[str, Any]] = [{**record, **numbers} for (_, record), numbers in zip(records, report.rows,
                                                                                        strict=True)]
    write_jsonl(output_path, out)
    return report


def score_command(
    input: Path = typer.Option(..., "--input", "-i", help="JSONL of {response, reference?, persona?, context?}."),
    output: Path = typer.Option(..., "--output", "-o", help="Where to write the scored JSONL (one line per input)."),
    metrics: str | None = typer.Option(None, "--metrics", help=METRICS_HELP),
    nli_model: str | None = NLI_OPTION,
    bertscore_model: str | None = BERTSCORE_MODEL_OPTION,
    bertscore_layers: int | None = BERTSCORE_LAYERS_OPTION,
    embedding_model: str | None = EMBEDDING_OPTION,
    failures_as_worst: bool = WORST_OPTION,
    rouge_stemmer: bool = ROUGE_STEMMER_OPTION,
) -> None:
    """Score responses against references and personas: ROUGE, METEOR, BERTScore, Dist, C/UE-Score, coverage."""

    def body() -> None:
        if output.resolve() == input.resolve():
            raise PersonagraphError(f"--output {output}: is the input file; write the scores elsewhere")
        records = read_jsonl(input, objects=True, allow_empty=False)
        have_reference = all(isinstance(r.get("reference"), str) and r["reference"].strip() for _, r in records)
        have_persona = all(r.get("persona") for _, r in records)
        chosen = choose_metrics(metrics, have_reference, have_persona, nli_model)
        if not chosen:
            raise PersonagraphError(f"{input}: no metric applies; name some with --metrics")
        config = ScoreConfig(
            metrics=chosen, nli_model=nli_model, bertscore_model=bertscore_model,
            bertscore_layers=bertscore_layers, embedding_model=embedding_model,
            failures_as_worst=failures_as_worst, rouge_stemmer=rouge_stemmer,
        )
        with progress_display(transient=True) as progress:
            report = score_file(input, output, config, records, progress_bars(progress))
        console.print(f"[bold]{input.name}: {report.n} responses[/bold]")
        console.print(render_report(report))
        print_models(report)
        console.print(f"scores: {output}")

    run(body)


def register(app: typer.Typer) -> None:
    app.command("score")(score_command)
