"""``personagraph meta-eval``: judges' agreement with human ratings; do they prefer their own family?"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.console import Group
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from personagraph.cli._common import (
    API_KEY_OPTION,
    BASE_URL_OPTION,
    ENDPOINT_OPTION,
    JUDGE_PROTOCOL_OPTION,
    RETRY_FAILED_OPTION,
    TIMEOUT_OPTION,
    console,
    model_settings,
    progress_bars,
    progress_display,
    run,
)
from personagraph.errors import PersonagraphError
from personagraph.judges.meta_eval import MetaEvalConfig, write_summary
from personagraph.judges.self_preference import self_preference
from personagraph.models.settings import MAX_CONCURRENCY
from personagraph.runs.base import ProgressEvent, make_config
from personagraph.runs.eval import DEFAULT_JUDGE
from personagraph.runs.meta_eval import MetaEvalSummary
from personagraph.runs.meta_eval import run as run_meta_eval

ITEMS_HELP = (
    "Human-rated responses: JSONL, or CSV with the same columns: id, persona?, context?, question?, "
    'response, criterion, human (a number or a list: [4,5,3] in JSON; 4;5;3 or "[4,5,3]" in CSV), '
    "scale? ([1,5]; 1;5 in CSV; default the rubric's)."
)


def _num(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _est(estimate: dict[str, Any] | None) -> str:
    """A value with its CI on a second line."""
    if not estimate or estimate.get("value") is None:
        return "—"
    text = f"{estimate['value']:.2f}"
    if estimate.get("ci_low") is not None and estimate.get("ci_high") is not None:
        text += f"\n[dim][{estimate['ci_low']:.2f}, {estimate['ci_high']:.2f}][/]"
    return text


def _versus(versus: dict[str, Any] | None) -> str:
    """The judge's ρ minus the best baseline's, with its CI and whether it beats it."""
    if not versus:
        return "—"
    text = _est(versus["spearman_difference"])
    return text + ("\n[green]beats[/]" if versus["beats"] else "\n[yellow]does not beat[/]")


def render_agreement(summary: dict[str, Any]) -> Group:
    """A table per criterion (and overall): a row per judge and the ensemble, 95% bootstrap CIs below."""
    tables: list[Any] = []
    results = summary["results"]
    names = list(summary["criteria"]) + (["overall"] if len(summary["criteria"]) > 1 else [])
    for name in names:
        section = results[name]
        human = section["human"]
        alpha = human["krippendorff_alpha"]
        notes = [f"{section['n_records']} records, human scale {section['scale'][0]}–{section['scale'][1]}"]
        if alpha is not None:
            notes.append(f"humans' Krippendorff α {alpha:.2f} ({human['n_multi_rated']} multi-rated)")
        if human["length_correlation"]["value"] is not None:
            notes.append(f"humans' len ρ {human['length_correlation']['value']:.2f}")
        if section["n_records"] < 10:
            notes.append("[yellow]fewer than 10 records: intervals are rough[/]")
        if section.get("note"):
            notes.append(section["note"])
        table = Table(
            title=f"[bold]{name}[/] — agreement with human ratings",
            caption=" · ".join(notes),
            caption_justify="left",
        )
        best = section.get("best_baseline")
        columns = ("judge", "n", "fail", "Spearman ρ", "Kendall τ", "QW κ", "MAE", "len ρ",
                   f"ρ − {best}" if best else "vs baseline")
        for column in columns:
            table.add_column(column, justify="left" if column == "judge" else "right", overflow="fold")
        for judge, row in section["judges"].items():
            table.add_row(
                judge,
                str(row["n"]),
                str(row["failed"]),
                _est(row["spearman"]),
                _est(row["kendall"]),
                _est(row["quadratic_kappa"]),
                _est(row["mae"]),
                _est(row["length_correlation"]),
                _versus(row.get("vs_best_baseline")),
                style="bold" if judge == "ensemble" else None,
            )
        for name_, row in section.get("baselines", {}).items():
            table.add_row(f"baseline: {name_}", str(row["n"]), "—", _est(row["spearman"]),
                          _est(row["kendall"]), "—", "—", "—", "—", style="dim")
        tables.append(table)
        for judge, row in section["judges"].items():
            versus = row.get("vs_best_baseline")
            if versus is not None and not versus["beats"]:
                tables.append(Text.from_markup(
                    f"[yellow]{escape(judge)} does not beat the {versus['baseline']} baseline on {name}[/] "
                    "(the CI of its ρ minus the baseline's reaches 0 or below)"
                ))
    tables.append(
        Text(
            "[95% bootstrap CI] · QW κ: quadratic-weighted Cohen's κ on the human scale · len ρ: "
            "Spearman ρ of score vs response length · failed verdicts are excluded, never 0 · baselines: "
            "length (words), word_overlap (most content words shared with one persona fact), "
            "embedding_similarity (MiniLM cosine with the persona); a judge beats the best one when the "
            "CI of its ρ minus that baseline's is above 0",
            style="dim",
        )
    )
    return Group(*tables)


def render_self_preference(result: dict[str, Any]) -> Table:
    """One row per judge: own − other score gaps with CIs and p-values."""
    table = Table(title=f"Self-preference in {result['run_dir']} (own − other; 95% bootstrap CI, p)")
    for column in (
        "judge",
        "own models",
        "unpaired gap",
        "paired (by question)",
        "controlled by other judges",
        "note",
    ):
        table.add_column(column, overflow="fold")

    def gap(value: dict[str, Any] | None) -> str:
        if not value or value.get("gap") is None:
            return "—"
        ci = "" if value["ci_low"] is None else f" [{value['ci_low']:+.2f}, {value['ci_high']:+.2f}]"
        p = "" if value["p_value"] is None else f" p={value['p_value']:.3f}"
        return f"{value['gap']:+.2f}{ci}{p} (n {value['n_own']}/{value['n_other']})"

    for row in result["judges"]:
        table.add_row(
            row["judge"],
            ", ".join(row["own_models"]) or "—",
            gap(row["unpaired"]),
            gap(row["paired"]),
            gap(row["controlled"]),
            row["note"],
        )
    return table


def meta_eval_command(
    items: Path | None = typer.Option(None, "--items", help=ITEMS_HELP),
    judge: list[str] = typer.Option(
        [], "--judge", "-j", help=f"Judge model (repeatable; default {DEFAULT_JUDGE})."
    ),
    criteria: list[str] = typer.Option(
        [],
        "--criteria",
        help="Only these criteria: NAME[,NAME…] (task names or "
        "keys, packaged rubric keys, --rubric file stems).",
    ),
    rubric: list[Path] = typer.Option(
        [],
        "--rubric",
        help="A rubric file (YAML, like judges/rubrics/*.yaml) "
        "whose stem or task name items can use as criterion (repeatable).",
    ),
    run_dir: Path = typer.Option(
        Path("runs/meta-eval"), "--run-dir", help="Where verdicts and meta_eval.json go; reuse it to resume."
    ),
    self_pref: Path | None = typer.Option(
        None,
        "--self-preference",
        help="An eval run directory: compare how "
        "each judge scores its own model family's answers vs others'.",
    ),
    concurrency: int = typer.Option(8, min=1, max=MAX_CONCURRENCY, help="Judge calls in flight."),
    seed: int = typer.Option(0, help="Seed for the judges and the bootstrap."),
    resamples: int = typer.Option(
        1000, "--n-resamples", "--resamples", min=100, max=100_000,
        help="Bootstrap resamples per interval (BCa).",
    ),
    base_url: str | None = BASE_URL_OPTION,
    api_key: str | None = API_KEY_OPTION,
    endpoint: list[str] = ENDPOINT_OPTION,
    timeout: float = TIMEOUT_OPTION,
    judge_protocol: str | None = JUDGE_PROTOCOL_OPTION,
    retry_failed: bool = RETRY_FAILED_OPTION,
) -> None:
    """Meta-evaluate judges: agreement with human labels (ρ, τ, κ, MAE with CIs) and self-preference."""

    async def body() -> MetaEvalSummary | None:
        if items is None and self_pref is None:
            raise PersonagraphError("give --items FILE, --self-preference RUN_DIR, or both")
        if items is None and (criteria or rubric):
            raise PersonagraphError("--criteria and --rubric need --items FILE")
        summary: dict[str, Any] = {}
        outcome: MetaEvalSummary | None = None
        if items is not None:
            names = [n.strip() for value in criteria for n in value.split(",") if n.strip()]
            config = make_config(
                MetaEvalConfig,
                items=str(items),
                judges=judge or [DEFAULT_JUDGE],
                criteria=names or None,
                rubric_files=[str(r) for r in rubric],
                concurrency=concurrency,
                seed=seed,
                n_resamples=resamples,
                judge_protocol=judge_protocol,
                retry_failed=retry_failed,
            )
            settings = model_settings(base_url, api_key, endpoint, timeout_s=timeout)
            # Started once the items file is validated, so an input error prints alone.
            progress = progress_display()
            draw = progress_bars(progress)

            def on_progress(event: ProgressEvent) -> None:
                if not progress.live.is_started:
                    progress.start()
                draw(event)

            try:
                outcome = await run_meta_eval(config, run_dir, settings=settings, on_progress=on_progress)
            finally:
                if progress.live.is_started:
                    progress.stop()
            summary = outcome.model_dump(mode="json")
            console.print(render_agreement(summary))
            console.print(
                f"LLM calls this run: {outcome.llm_calls} · cache hits: {outcome.cache_hits} · "
                f"failed verdicts: {summary['failed_verdicts']} (excluded)"
            )
        if self_pref is not None:
            result = self_preference(self_pref, judge or None, seed=seed, n_resamples=resamples)
            summary["self_preference"] = result
            console.print(render_self_preference(result))
        path = write_summary(run_dir, summary)
        console.print(f"results: {path}")
        return outcome

    run(body)


def register(app: typer.Typer) -> None:
    app.command("meta-eval")(meta_eval_command)
