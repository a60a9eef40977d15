"""``personagraph behavior-alignment``: strategy labelling, Cohen's κ and behavior alignment of a CRS."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from personagraph.cli._common import (
    API_KEY_OPTION,
    BASE_URL_OPTION,
    ENDPOINT_OPTION,
    MAX_COUNT,
    MAX_TOKENS,
    RETRY_FAILED_OPTION,
    TIMEOUT_OPTION,
    console,
    model_settings,
    progress_bars,
    progress_display,
    run,
)
from personagraph.cli.score import EMBEDDING_OPTION
from personagraph.metrics.behavior import BehaviorConfig, Estimate
from personagraph.runs.behavior import BehaviorSummary
from personagraph.runs.behavior import run as run_behavior_alignment


def _estimate(e: Estimate | None) -> tuple[str, str, str]:
    if e is None or e.value is None:
        return "—", "—", str(e.n if e else 0)
    ci = "—" if e.ci_low is None or e.ci_high is None else f"{e.ci_low:.3f}–{e.ci_high:.3f}"
    return f"{e.value:.3f}", ci, str(e.n)


def behavior_command(
    dialogues: Path = typer.Option(..., "--dialogues", help="INSPIRED-style TSV: speaker, text, expert_label "
                                   "(optional dialog_id, second_label), one row per utterance."),
    labeller: str | None = typer.Option(None, "--labeller", help="LLM strategy labeller: a model spec."),
    classifier: Path | None = typer.Option(None, "--classifier", help="Strategy classifier JSON (embeddings + "
                                           "logistic regression); written there with --fit-classifier."),
    fit_classifier: Path | None = typer.Option(None, "--fit-classifier", help="Labelled TSV to fit the "
                                               "classifier on first (saved to --classifier)."),
    responses: Path | None = typer.Option(None, "--responses", help='System responses JSONL: {"dialog_id", '
                                          '"turn" (1-based recommender turn), "response"}.'),
    system: str | None = typer.Option(None, "--system", help="A model spec that plays the recommender "
                                      "(generates the system responses)."),
    system_speaker: str = typer.Option("RECOMMENDER", "--system-speaker", help="Speaker the system plays."),
    limit: int | None = typer.Option(None, "--limit", min=1, max=MAX_COUNT, help="Only the first N dialogues."),
    run_dir: Path = typer.Option(Path("runs/behavior"), "--run-dir", help="Where results go (LLM calls are "
                                 "cached there, so a rerun resumes)."),
    seed: int = typer.Option(0, help="Bootstrap seed."),
    n_resamples: int = typer.Option(2000, "--n-resamples", "--resamples", min=100, max=100_000,
                                    help="Bootstrap resamples per interval."),
    max_tokens: int = typer.Option(128, "--max-tokens", min=1, max=MAX_TOKENS, help="Longest --system response, in tokens."),
    embedding_model: str | None = EMBEDDING_OPTION,
    base_url: str | None = BASE_URL_OPTION,
    api_key: str | None = API_KEY_OPTION,
    endpoint: list[str] = ENDPOINT_OPTION,
    timeout: float = TIMEOUT_OPTION,
    retry_failed: bool = RETRY_FAILED_OPTION,
) -> None:
    """Label recommendation strategies; report κ against human labels and the system's behavior alignment."""

    async def body() -> BehaviorSummary:
        config = BehaviorConfig(
            dialogues=dialogues, labeller=labeller, classifier=classifier, fit_classifier=fit_classifier,
            responses=responses, system=system, system_speaker=system_speaker, limit=limit, seed=seed,
            n_resamples=n_resamples, max_tokens=max_tokens,
            embedding_model=embedding_model, retry_failed=retry_failed,
        )
        with progress_display(label_width=13, transient=True) as progress:
            summary = await run_behavior_alignment(config, run_dir, settings=model_settings(base_url, api_key, endpoint, timeout_s=timeout),
                                                   on_progress=progress_bars(progress))
        console.print(f"[bold]Behavior alignment · {summary.dialogues} dialogues · labeller {summary.labeller}[/bold]")
        table = Table()
        for column in ("", "value", "95% CI", "n"):
            table.add_column(column, justify="right" if column else "left")
        table.add_row("Cohen's κ (labeller vs human)", *_estimate(summary.kappa))
        if summary.system is not None:
            table.add_row(f"BA of {summary.system}", *_estimate(summary.ba))
        console.print(table)
        notes = [(f"labeller gave no label to {summary.labeller_failures} of {summary.labelled_utterances} "
                 "human utterances")] if summary.labeller_failures else []
        if summary.system is not None:
            notes.append(f"system responses: {summary.responses} (first recommender turns excluded), "
                         f"failed/empty {summary.failed_responses}, unlabelled human turns "
                         f"{summary.unlabelled_turns}, labeller failures {summary.system_labeller_failures}")
        for note in notes:
            console.print(f"[dim]{note}[/dim]")
        if classifier and fit_classifier:
            console.print(f"classifier saved: {classifier}")
        console.print(f"results: {run_dir}/behavior_summary.json")
        return summary

    run(body)


def register(app: typer.Typer) -> None:
    app.command("behavior-alignment")(behavior_command)
