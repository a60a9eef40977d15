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
from personagraph.judges.benchmarks import BENCHMARKS, GROUPS
from personagraph.judges.cards import all_cards, figure_text
from personagraph.judges.meta_eval import EXPECTED_SUFFIX, MetaEvalConfig, write_summary
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


BENCHMARK_HELP = (
    "Built-in human-rated benchmarks (repeatable or comma-separated): "
    + ", ".join(f"{name} ({b.title})" for name, b in BENCHMARKS.items())
    + "; " + ", ".join(f"{g}: all of {', '.join(m)}" for g, m in GROUPS.items())
    + ". Files are downloaded into the cache on first use (verified by sha256), or read from --benchmark-dir; "
    "a finished run saves each judge's validity card."
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


def _separation(section: dict[str, Any]) -> tuple[dict[str, str], str | None]:
    """Per scorer (judge, ``baseline: …``, ``reference``): the pairwise accuracy of pairs with its CI, or the
    AUC of the replies people scored highest against the lowest; and the column's title."""
    if "pairwise" in section:
        return ({name: _est(row["pairwise_accuracy"]) for name, row in section["pairwise"].items()},
                "pairwise acc.")
    if "lowest_vs_highest" in section:
        ends = section["lowest_vs_highest"]
        return ({name: _num(auc) for name, auc in ends["auc"].items()},
                f"AUC top vs bottom ({ends['n_highest']}/{ends['n_lowest']})")
    return {}, None


def render_agreement(summary: dict[str, Any]) -> Group:
    """A table per criterion (and overall): a row per judge and the ensemble, 95% bootstrap CIs below."""
    tables: list[Any] = []
    results = summary["results"]
    names = list(summary["criteria"]) + (["overall"] if len(summary["criteria"]) > 1 and "overall" in results
                                         else [])
    subsets = (summary.get("benchmarks") or {}).get("subsets", {})
    for name in names:
        section = results[name]
        about = subsets.get(name, {})
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
        if about.get("description"):
            notes.append(escape(about["description"]))
        judged_on = summary["criteria"].get(name, {}).get("name") if about else None
        table = Table(
            title=f"[bold]{escape(name)}[/]"
            + (f" ({escape(judged_on)})" if judged_on and judged_on != name else "")
            + " — agreement with human ratings",
            caption=" · ".join(notes),
            caption_justify="left",
        )
        best = section.get("best_baseline")
        separation, separation_column = _separation(section)
        columns = ("judge", "n", "fail", "Spearman ρ", "Kendall τ", "QW κ", "MAE", "len ρ",
                   f"ρ − {best}" if best else "vs baseline",
                   *([separation_column] if separation_column else []))
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
                *([separation.get(judge, "—")] if separation_column else []),
                style="bold" if judge == "ensemble" else None,
            )
        for name_, row in section.get("baselines", {}).items():
            table.add_row(f"baseline: {name_}", str(row["n"]), "—", _est(row["spearman"]),
                          _est(row["kendall"]), "—", "—", "—", "—",
                          *([separation.get(f"baseline: {name_}", "—")] if separation_column else []), style="dim")
        if section.get("reference"):
            reference = section["reference"]
            table.add_row(f"reference: {escape(about.get('reference') or 'published judge')}",
                          str(reference["n"]), "—", _est(reference["spearman"]), "—", "—", "—", "—", "—",
                          *([separation.get("reference", "—")] if separation_column else []), style="italic")
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


def render_benchmarks(summary: dict[str, Any]) -> Group:
    """Per judge, one row per benchmark subset: n, ρ with its CI, the best trivial baseline on the same
    items and the judge's paired difference to it, the pairwise accuracy or top-vs-bottom AUC, and the
    published reference judge's ρ where the data carries one."""
    tables: list[Any] = []
    results = summary["results"]
    for judge in summary["judges"]:
        rows = [judge + EXPECTED_SUFFIX, judge] if any(
            judge + EXPECTED_SUFFIX in results[s]["judges"] for s in summary["criteria"]) else [judge]
        name = rows[0]
        table = Table(title=f"[bold]{escape(name)}[/] against people", caption_justify="left")
        for column in ("subset (criterion)", "n", "ρ [95% CI]", "best baseline ρ", "ρ − baseline",
                       "pairs / AUC", "reference ρ"):
            justify = "left" if column.startswith("subset") else "right"
            table.add_column(column, justify=justify, overflow="fold")
        for section, about in summary["criteria"].items():
            result = results[section]
            row = result["judges"].get(name) or result["judges"].get(judge)
            if row is None:
                continue
            best = result.get("best_baseline")
            baseline = f"{best}\n{_num(result['baselines'][best]['spearman']['value'])}" if best else "—"
            separation, _ = _separation(result)
            table.add_row(
                f"{escape(section)}\n[dim]({escape(about.get('name', about['criterion']))})[/]",
                f"{row['n']}" + (f"\n[red]{row['failed']} failed[/]" if row["failed"] else ""),
                _est(row["spearman"]),
                baseline,
                _versus(row.get("vs_best_baseline")),
                separation.get(name, "—"),
                _num((result.get("reference") or {}).get("spearman", {}).get("value")),
            )
        tables.append(table)
    tables.append(Text(
        "ρ: Spearman with the mean human rating [95% bootstrap CI] · best baseline: the best of length, word "
        "overlap and MiniLM similarity on the same items; the judge beats it when the CI of the difference is "
        "above 0 · pairs: pairwise accuracy (ties half); AUC: replies people scored highest against the lowest "
        "(n top/bottom in meta_eval.json) · reference: the published judge whose scores the data carries "
        "(CharacterBench: CharacterJudge) · every statistic per subset is in meta_eval.json",
        style="dim",
    ))
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
    benchmark: list[str] = typer.Option(
        [], "--benchmark", help=BENCHMARK_HELP, metavar="NAME[,NAME…]",
    ),
    benchmark_dir: Path | None = typer.Option(
        None, "--benchmark-dir", help="Local copies of the benchmarks' files, one folder per source "
        "(characterbench/, usr/, persobench/) with the upstream file names; read instead of the cache or a "
        "download (a subset is fine: its sha256 is recorded).",
    ),
    sample: int | None = typer.Option(
        None, "--sample", min=1, max=100_000, help="Per benchmark subset, N items (N pairs), stratified by "
        "the human score and seeded by --seed, for a quick reading (default: all).",
    ),
    list_cards: bool = typer.Option(
        False, "--cards", help="List the validity cards saved (each judge's agreement with people) and exit.",
    ),
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
        if list_cards:
            console.print(render_cards())
            return None
        if items is not None and benchmark:
            raise PersonagraphError("give --items FILE or --benchmark NAME, not both")
        if items is None and not benchmark and self_pref is None:
            raise PersonagraphError("give --items FILE, --benchmark NAME (e.g. persona), --self-preference "
                                    "RUN_DIR, or one of the first two with the last")
        if items is None and not benchmark and (criteria or rubric):
            raise PersonagraphError("--criteria and --rubric need --items FILE or --benchmark NAME")
        if not benchmark and (benchmark_dir is not None or sample is not None):
            raise PersonagraphError("--benchmark-dir and --sample go with --benchmark NAME")
        summary: dict[str, Any] = {}
        outcome: MetaEvalSummary | None = None
        if items is not None or benchmark:
            names = [n.strip() for value in criteria for n in value.split(",") if n.strip()]
            config = make_config(
                MetaEvalConfig,
                items=None if items is None else str(items),
                benchmark=benchmark,
                benchmark_dir=None if benchmark_dir is None else str(benchmark_dir),
                sample=sample,
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
            console.print(render_benchmarks(summary) if benchmark else render_agreement(summary))
            console.print(
                f"LLM calls this run: {outcome.llm_calls} · cache hits: {outcome.cache_hits} · "
                f"failed verdicts: {summary['failed_verdicts']} (excluded)"
            )
            for card in outcome.cards:
                console.print(f"validity card saved: {card}", markup=False)
            if benchmark and not outcome.cards:
                console.print("no validity card saved: failed or unfinished verdicts (run the same command "
                              "again to retry them)", style="yellow")
        if self_pref is not None:
            result = self_preference(self_pref, judge or None, seed=seed, n_resamples=resamples)
            summary["self_preference"] = result
            console.print(render_self_preference(result))
        path = write_summary(run_dir, summary)
        console.print(f"results: {path}")
        return outcome

    run(body)


def render_cards() -> Table:
    """Every validity card: judge, protocol, date, data and the figures per criterion."""
    table = Table(title="Validity cards: judges measured against people", show_lines=True)
    for column in ("judge", "protocol", "measured", "figures", "file"):
        table.add_column(column, overflow="fold")
    found = all_cards()
    for card, where in found:
        figures = "\n".join(
            f"{c.task}: " + ", ".join(figure_text(f) for f in c.figures) for c in card.criteria.values()
        )
        table.add_row(escape(card.judge), escape(card.protocol), f"{card.measured}\n{escape(card.data)}",
                      escape(figures), escape(where))
    if not found:
        table.caption = "none yet: run `personagraph meta-eval --benchmark persona -j SPEC`"
    return table


def register(app: typer.Typer) -> None:
    app.command("meta-eval")(meta_eval_command)
