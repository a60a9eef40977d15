"""The headline table of each run kind (``view``, ``report``, exports): a registry of builders, each
returning its kind's table(s) for the runs it recognises (None or [] for other kinds).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from personagraph.report.evaldata import headline
from personagraph.report.load import Run
from personagraph.report.sections import (
    behavior_table,
    controls_table,
    memory_table,
    metric_table,
    samples_table,
    session_table,
)
from personagraph.report.tables import Column, Table
from personagraph.schemas import TASK_NAMES

HeadlineBuilder = Callable[[list[Run]], "Table | list[Table] | None"]
_HEADLINES: list[HeadlineBuilder] = []


def headline_builder(fn: HeadlineBuilder) -> HeadlineBuilder:
    """Registers a builder of the headline table for some run kinds (returns None for other kinds)."""
    _HEADLINES.append(fn)
    return fn


@headline_builder
def eval_headline(runs: list[Run]) -> Table | None:
    """Model × task: task means, PersonaScore with its 95% CI, refusal rate, failed verdicts, judge α."""
    evals = [run for run in runs if run.is_eval]
    if not evals:
        return None
    several = len(runs) > 1
    columns = [Column("run", "run")] if several else []
    columns += [Column("model", "model")]
    columns += [Column(task, task, "score") for task in TASK_NAMES]
    columns += [
        Column("persona_score", "PersonaScore", "score"),
        Column("ci_low", "95% CI low", "score"),
        Column("ci_high", "95% CI high", "score"),
        Column("refusal_rate", "refusal rate", "pct"),
        Column("manipulation_flags", "flagged as grading itself", "int"),
        Column("failed_verdicts", "failed verdicts", "int"),
        Column("judge_alpha", "judge α", "float"),
        Column("answers", "answers", "int"),
        Column("answers_at_token_limit", "cut at token limit", "int"),
    ]
    rows = []
    for run in evals:
        for row in headline(run):
            ci = row["ci"] or [None, None]
            out: dict[str, Any] = {"run": run.name} if several else {}
            out["model"] = row["model"]
            for task in TASK_NAMES:
                out[task] = row["tasks"].get(task, {}).get("mean")
            out.update(persona_score=row["persona_score"], ci_low=ci[0], ci_high=ci[1],
                       refusal_rate=row["refusal_rate"], manipulation_flags=row["manipulation_flags"],
                       failed_verdicts=row["failed_verdicts"],
                       judge_alpha=row["judge_alpha"], answers=row["answers"],
                       answers_at_token_limit=row["answers_at_token_limit"])
            out["_tasks"] = row["tasks"]
            rows.append(out)
    return Table(
        "PersonaScore (1–5) by model and task",
        columns,
        rows,
        note="Task score = mean item score (an item = mean of its parsed verdicts). PersonaScore = mean of the "
             "task scores; 95% CI by bootstrap. Judge α = Krippendorff's alpha (ordinal) between judges.",
    )


def _concat(runs: list[Run], build: Callable[[Run], Table | None]) -> list[Table]:
    """Same-titled tables of several runs joined into one (a ``run`` column first when there are several
    runs); tables with different titles (e.g. PersoBench and LongLaMP) stay apart."""
    made = [(run, table) for run in runs if (table := build(run)) is not None and table.rows]
    if len(runs) == 1:
        return [table for _, table in made]
    out = []
    for title in dict.fromkeys(table.title for _, table in made):
        group = [(run, table) for run, table in made if table.title == title]
        columns: list[Column] = [Column("run", "run")]
        for _, table in group:
            columns += [c for c in table.columns if c.key not in {k.key for k in columns}]
        rows = [{"run": run.name, **row} for run, table in group for row in table.rows]
        out.append(Table(title, columns, rows, note=group[0][1].note))
    return out


def _estimate(value: dict[str, Any] | None) -> tuple[Any, Any, Any]:
    value = value or {}
    return value.get("value"), value.get("ci_low"), value.get("ci_high")


def meta_eval_table(run: Run) -> Table | None:
    """A meta-eval run: per judge and criterion (or benchmark subset), ρ with the people's mean rating and its
    CI, the best trivial baseline's ρ and the judge's paired difference to it, pairwise accuracy or the
    top-vs-bottom AUC, and the published reference judge's ρ."""
    summary = run.summary
    if run.kind != "meta-eval" or not isinstance(summary.get("results"), dict):
        return None
    rows = []
    for section, about in (summary.get("criteria") or {}).items():
        result = summary["results"].get(section) or {}
        best = result.get("best_baseline")
        for judge, row in (result.get("judges") or {}).items():
            rho, low, high = _estimate(row.get("spearman"))
            versus = row.get("vs_best_baseline") or {}
            diff, diff_low, diff_high = _estimate(versus.get("spearman_difference"))
            paired = (result.get("pairwise") or {}).get(judge) or {}
            separation = paired.get("pairwise_accuracy", {}).get("value")
            if separation is None:
                separation = ((result.get("lowest_vs_highest") or {}).get("auc") or {}).get(judge)
            rows.append({
                "judge": judge, "subset": section, "criterion": about.get("name") or about.get("criterion"),
                "n": row.get("n"), "failed": row.get("failed"), "rho": rho, "ci_low": low, "ci_high": high,
                "baseline": best,
                "baseline_rho": _estimate(((result.get("baselines") or {}).get(best) or {}).get("spearman"))[0],
                "diff": diff, "diff_low": diff_low, "diff_high": diff_high, "separation": separation,
                "reference": ((result.get("reference") or {}).get("spearman") or {}).get("value"),
            })
    return Table("Judges against people (meta-eval)", [
        Column("judge", "judge"), Column("subset", "criterion or subset"), Column("criterion", "judged on"),
        Column("n", "n", "int"), Column("failed", "failed", "int"), Column("rho", "Spearman ρ", "float"),
        Column("ci_low", "95% CI low", "float"), Column("ci_high", "95% CI high", "float"),
        Column("baseline", "best baseline"), Column("baseline_rho", "its ρ", "float"),
        Column("diff", "ρ − baseline", "float"), Column("diff_low", "CI low", "float"),
        Column("diff_high", "CI high", "float"), Column("separation", "pairwise / AUC", "float"),
        Column("reference", "reference judge ρ", "float"),
    ], rows, note="ρ: Spearman with the mean human rating, 95% bootstrap CI. Baselines: length, word overlap, "
                  "MiniLM similarity; ρ − baseline: paired bootstrap. Pairwise: share of pairs scored higher under "
                  "the true persona; AUC: replies people scored highest against the lowest. Reference: the "
                  "published judge whose scores the data carries (CharacterBench: CharacterJudge).")


@headline_builder
def meta_eval_headline(runs: list[Run]) -> list[Table]:
    """Meta-eval runs: each judge's agreement with people, per criterion or benchmark subset."""
    return _concat(runs, meta_eval_table)


@headline_builder
def controls_headline(runs: list[Run]) -> list[Table]:
    """Eval runs with control arms: each agent minus each arm, with its paired CI and the judges' standing."""
    return _concat([run for run in runs if run.is_eval], lambda run: controls_table(run.summary))


@headline_builder
def samples_headline(runs: list[Run]) -> list[Table]:
    """Eval runs with repeated samples: per agent and task, mean, CI over questions and samples, spread, pass^K."""
    return _concat([run for run in runs if run.is_eval], lambda run: samples_table(run.summary))


@headline_builder
def session_headline(runs: list[Run]) -> list[Table]:
    """Sessions: turns, mean turn score, drift slope, break point, stop reason, verdict."""
    return _concat(runs, session_table)


@headline_builder
def metric_headline(runs: list[Run]) -> list[Table]:
    """Metric runs (PersoBench, …): metric means, failure ratio, response time per model."""
    return _concat(runs, metric_table)


@headline_builder
def behavior_headline(runs: list[Run]) -> list[Table]:
    """Behavior alignment: Cohen's κ of the labeller and the system's BA, with CIs."""
    return _concat(runs, behavior_table)


@headline_builder
def memory_headline(runs: list[Run]) -> list[Table]:
    """Memory runs: the retrieval metric table or the dialogue criteria."""
    return _concat(runs, memory_table)


def headline_tables(runs: list[Run]) -> list[Table]:
    """The headline table of every run kind present in ``runs``."""
    tables: list[Table] = []
    for builder in _HEADLINES:
        made = builder(runs)
        tables += made if isinstance(made, list) else [made] if made is not None else []
    return [table for table in tables if table.rows]
