"""Tables as data: columns with formats and rows of raw values, rendered to HTML, rich, CSV, JSON, Markdown.

The headline table of a run kind is built here once; ``report``, ``view`` and ``--format`` all print it.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from personagraph.errors import PersonagraphError
from personagraph.report.load import Run

Format = Literal["text", "score", "float", "pct", "int", "usd", "seconds", "p"]
EXPORT_FORMATS = ("csv", "json", "markdown")


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    fmt: Format = "text"


@dataclass
class Table:
    """A titled table; ``rows`` hold raw values (None = not available), formatted only when rendered."""

    title: str
    columns: list[Column]
    rows: list[dict[str, Any]] = field(default_factory=list)
    note: str = ""

    def keys(self) -> list[str]:
        return [c.key for c in self.columns]


def fmt(value: Any, kind: Format = "text") -> str:
    """A cell as text; None, NaN and missing values are "—"."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    if isinstance(value, float) and value == 0:
        value = 0.0  # never "-0.000"
    if kind == "text":
        if isinstance(value, list | tuple) and len(value) == 2 and all(isinstance(v, int | float) for v in value):
            return f"{value[0]:.2f}–{value[1]:.2f}"
        if isinstance(value, float):
            return f"{value:.3g}"
        return str(value)
    if kind == "score":
        return f"{float(value):.2f}"
    if kind == "float":
        return f"{float(value):.3f}"
    if kind == "pct":
        return f"{float(value):.0%}" if float(value) in (0.0, 1.0) else f"{float(value):.1%}"
    if kind == "int":
        return f"{int(value):,}"
    if kind == "usd":
        if float(value) == 0:
            return "$0"
        return f"${float(value):.4f}" if float(value) < 1 else f"${float(value):,.2f}"
    if kind == "seconds":
        return f"{float(value):.1f} s"
    if kind == "p":
        return "<0.001" if float(value) < 0.001 else f"{float(value):.3f}"
    return str(value)


# --- headline tables per run kind --------------------------------------------------------------------
HeadlineBuilder = Callable[[list[Run]], "Table | list[Table] | None"]
_HEADLINES: list[HeadlineBuilder] = []


def headline_builder(fn: HeadlineBuilder) -> HeadlineBuilder:
    """Registers a builder of the headline table for some run kinds (returns None for other kinds)."""
    _HEADLINES.append(fn)
    return fn


@headline_builder
def eval_headline(runs: list[Run]) -> Table | None:
    """Model × task: task means, PersonaScore with its 95% CI, refusal rate, failed verdicts, judge α."""
    from personagraph.report.evaldata import headline
    from personagraph.schemas import TASK_NAMES

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
        Column("failed_verdicts", "failed verdicts", "int"),
        Column("judge_alpha", "judge α", "float"),
        Column("answers", "answers", "int"),
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
                       refusal_rate=row["refusal_rate"], failed_verdicts=row["failed_verdicts"],
                       judge_alpha=row["judge_alpha"], answers=row["answers"])
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


@headline_builder
def session_headline(runs: list[Run]) -> list[Table]:
    """Sessions: turns, mean turn score, drift slope, break point, stop reason, verdict."""
    from personagraph.report.sections import session_table

    return _concat(runs, session_table)


@headline_builder
def metric_headline(runs: list[Run]) -> list[Table]:
    """Metric runs (PersoBench, …): metric means, failure ratio, response time per model."""
    from personagraph.report.sections import metric_table

    return _concat(runs, metric_table)


@headline_builder
def behavior_headline(runs: list[Run]) -> list[Table]:
    """Behavior alignment: Cohen's κ of the labeller and the system's BA, with CIs."""
    from personagraph.report.sections import behavior_table

    return _concat(runs, behavior_table)


@headline_builder
def memory_headline(runs: list[Run]) -> list[Table]:
    """Memory runs: the retrieval metric table or the dialogue criteria."""
    from personagraph.report.sections import memory_table

    return _concat(runs, memory_table)


def headline_tables(runs: list[Run]) -> list[Table]:
    """The headline table of every run kind present in ``runs``."""
    tables: list[Table] = []
    for builder in _HEADLINES:
        made = builder(runs)
        tables += made if isinstance(made, list) else [made] if made is not None else []
    return [table for table in tables if table.rows]


# --- export ------------------------------------------------------------------------------------------
def _plain(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def to_csv(table: Table) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([c.label for c in table.columns])
    for row in table.rows:
        writer.writerow(["" if _plain(row.get(c.key)) is None else row.get(c.key) for c in table.columns])
    return buffer.getvalue()


def to_json_rows(table: Table) -> list[dict[str, Any]]:
    rows = []
    for row in table.rows:
        out = {c.key: _plain(row.get(c.key)) for c in table.columns}
        if "_tasks" in row:
            out["tasks"] = {task: {"mean": v.get("mean"), "ci": v.get("ci"), "n": v.get("n")}
                            for task, v in row["_tasks"].items()}
        rows.append(out)
    return rows


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(table: Table) -> str:
    lines = [f"**{_md_cell(table.title)}**", ""]
    lines.append("| " + " | ".join(_md_cell(c.label) for c in table.columns) + " |")
    lines.append("|" + "|".join("---" if c.fmt == "text" else "---:" for c in table.columns) + "|")
    for row in table.rows:
        lines.append("| " + " | ".join(_md_cell(fmt(row.get(c.key), c.fmt)) for c in table.columns) + " |")
    if table.note:
        lines += ["", _md_cell(table.note)]
    return "\n".join(lines) + "\n"


def export(tables: list[Table], format: str) -> str:
    """The tables as CSV, JSON or Markdown text.

    CSV holds one table (several are separated by a blank line, each with its header); JSON is
    ``{"tables": [{"title", "columns", "rows"}]}``, numbers raw; Markdown is pipe tables.

    Raises:
        PersonagraphError: an unknown format.
    """
    if format not in EXPORT_FORMATS:
        raise PersonagraphError(f"--format {format!r}: choose one of {', '.join(EXPORT_FORMATS)}")
    if format == "csv":
        return "\n".join(to_csv(table) for table in tables)
    if format == "json":
        return json.dumps(
            {"tables": [{"title": t.title, "columns": [c.key for c in t.columns], "rows": to_json_rows(t)}
                        for t in tables]},
            indent=2, ensure_ascii=False,
        ) + "\n"
    return "\n".join(to_markdown(table) for table in tables)
