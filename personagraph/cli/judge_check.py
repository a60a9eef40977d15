"""``personagraph judge-check``: can the judges tell an answer from variants that must score lower?"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.text import Text

from personagraph.cli._common import (
    API_KEY_OPTION,
    BASE_URL_OPTION,
    ENDPOINT_OPTION,
    JUDGE_PROTOCOL_OPTION,
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
from personagraph.errors import PersonagraphError
from personagraph.judges.validity import VARIANT_KINDS
from personagraph.models.settings import MAX_CONCURRENCY
from personagraph.models.spec import DEFAULT_JUDGE
from personagraph.report.sections import judge_validity_tables
from personagraph.report.view import rich_table
from personagraph.runs.base import make_config
from personagraph.runs.judge_check import SUMMARY_FILE, JudgeCheckConfig, JudgeCheckSummary
from personagraph.runs.judge_check import run as run_check
from personagraph.terminal import plain


def protocol_line(protocols: dict[str, str]) -> str:
    """Which protocol each judge of a check was asked with (an eval's check asks as the eval did)."""
    return "judge check protocols: " + ", ".join(f"{judge} {name}" for judge, name in protocols.items())


def render_check(summary: JudgeCheckSummary) -> None:
    """The figures table, then one verdict line per judge (WARN in red), then the protocols asked with."""
    for table in judge_validity_tables(summary.model_dump(mode="json")):
        console.print(rich_table(table))
    for result in summary.results.values():
        console.print(Text(result.line, style="bold red" if result.verdict == "warn" else "bold green"))
    console.print(plain(protocol_line(summary.protocols)), soft_wrap=True)


def judge_check_command(
    from_run: Path | None = typer.Option(
        None, "--from", help="A finished eval run directory: its personas, questions and answers are checked."
    ),
    items: Path | None = typer.Option(
        None,
        "--items",
        help="A meta-eval items file (JSONL or CSV: id, persona, "
        "question, response, criterion, human, scale; contradiction: the response "
        "contradicting the persona, written by hand, used instead of the "
        "generator's); records rated below the middle of their scale are left out.",
    ),
    judge: list[str] = typer.Option(
        [],
        "--judge",
        "-j",
        help=f"Judge model (repeatable; default: the run's judges, else {DEFAULT_JUDGE}).",
    ),
    generator: str | None = typer.Option(
        None,
        "--generator",
        help="Model that writes the generic rewrites and the "
        "contradictions an items file does not hold (default: the run's "
        "generator, else the first judge).",
    ),
    per_task: int | None = typer.Option(
        None, "--per-task", min=1, max=MAX_COUNT, help="Answers per task taken from the run (seeded choice; default all)."
    ),
    variant: list[str] = typer.Option(
        [], "--variant", help=f"Variant kinds (repeatable; default all: {', '.join(VARIANT_KINDS)})."
    ),
    judge_protocol: str | None = JUDGE_PROTOCOL_OPTION,
    rubric: list[Path] = typer.Option(
        [], "--rubric", help="A rubric file an items file's criterion may name (repeatable)."
    ),
    run_dir: Path = typer.Option(
        Path("runs/judge-check"),
        "--run-dir",
        help=f"Where variants, verdicts and {SUMMARY_FILE} go; reuse it to resume.",
    ),
    concurrency: int = typer.Option(8, min=1, max=MAX_CONCURRENCY, help="Model calls in flight."),
    seed: int = typer.Option(0, help="Seed for the variants, the answer choice and the bootstrap."),
    resamples: int = typer.Option(
        1000, "--n-resamples", "--resamples", min=100, max=100_000, help="Bootstrap resamples per interval."
    ),
    min_auc: float = typer.Option(
        0.7, "--min-auc", min=0, max=1, help="Warn when a judge's swap AUC is below."
    ),
    min_caught: float = typer.Option(
        1.0,
        "--min-caught",
        min=0,
        max=1,
        help="Warn when a judge itself catches a "
        "smaller share of AI disclosures (own score at most the break cap).",
    ),
    max_judge_tokens: int = typer.Option(
        256, "--max-judge-tokens", min=16, max=MAX_TOKENS, help="Reply budget of a verdict."
    ),
    max_variant_tokens: int = typer.Option(
        400, "--max-variant-tokens", min=16, max=MAX_TOKENS, help="Reply budget of a generated variant."
    ),
    base_url: str | None = BASE_URL_OPTION,
    api_key: str | None = API_KEY_OPTION,
    endpoint: list[str] = ENDPOINT_OPTION,
    timeout: float = TIMEOUT_OPTION,
    retry_failed: bool = RETRY_FAILED_OPTION,
) -> None:
    """Metamorphic test of judges: persona swap, AI disclosure, generic rewrite, contradiction, padding."""

    async def body() -> JudgeCheckSummary:
        if (from_run is None) == (items is None):
            raise PersonagraphError("give exactly one of --from RUN_DIR or --items FILE")
        unknown = [v for v in variant if v not in VARIANT_KINDS]
        if unknown:
            raise PersonagraphError(
                f"--variant: unknown kind {unknown[0]!r} (known: {', '.join(VARIANT_KINDS)})"
            )
        fields: dict[str, Any] = {
            "from_run": None if from_run is None else str(from_run),
            "items": None if items is None else str(items),
            "judges": judge,
            "judge_protocol": judge_protocol,
            "generator": generator,
            "per_task": per_task,
            "rubric_files": [str(r) for r in rubric],
            "concurrency": concurrency,
            "seed": seed,
            "n_resamples": resamples,
            "min_auc": min_auc,
            "min_caught": min_caught,
            "max_judge_tokens": max_judge_tokens,
            "max_variant_tokens": max_variant_tokens,
            "retry_failed": retry_failed,
        }
        if variant:
            fields["variants"] = variant
        config = make_config(JudgeCheckConfig, **fields)
        with progress_display() as progress:
            summary = await run_check(
                config,
                run_dir,
                settings=model_settings(base_url, api_key, endpoint, timeout_s=timeout),
                on_progress=progress_bars(progress),
            )
        render_check(summary)
        console.print(
            f"LLM calls this run: {summary.llm_calls} · cache hits: {summary.cache_hits} · "
            f"failed verdicts: {summary.failed_verdicts} (excluded) · results: {run_dir}/{SUMMARY_FILE}"
        )
        return summary

    run(body)


def register(app: typer.Typer) -> None:
    app.command("judge-check")(judge_check_command)
