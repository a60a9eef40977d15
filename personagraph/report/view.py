"""``personagraph view``: a run's headline numbers as rich tables in the terminal.

:func:`render_summary` is also the table ``personagraph eval`` prints when a run ends.
"""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.markup import escape
from rich.table import Table as RichTable
from rich.text import Text

from personagraph.report.compare import verdict
from personagraph.report.cost import cost_rows, total_cost
from personagraph.report.evaldata import headline
from personagraph.report.headlines import headline_tables
from personagraph.report.load import Run
from personagraph.report.sections import judge_check_of, judge_validity_tables, judge_verdicts
from personagraph.report.tables import Column, Table, fmt
from personagraph.schemas import TASK_NAMES
from personagraph.terminal import key_column


def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def render_summary(summary: dict) -> RichTable:
    """The task × model table printed at the end of a run (also used by ``view``)."""
    models = list(summary["models"])
    verdicts = judge_verdicts(summary.get("judge_check") or {})
    caption = Text("\n".join(f"{'⚠ ' if warn else ''}judge validity: {line}" for line, warn in verdicts),
                   style="bold red" if any(warn for _, warn in verdicts) else "green")
    table = RichTable(title="PersonaScore (1–5)", caption=caption if verdicts else None,
                      caption_justify="left")
    table.add_column("")
    for model in models:
        table.add_column(Text(model), justify="right", overflow="fold")
    results = summary["models"]
    for task in TASK_NAMES:
        table.add_row(task, *(_fmt(results[m]["tasks"].get(task, {}).get("mean")) for m in models))
    table.add_section()
    table.add_row("PersonaScore", *("incomplete" if results[m].get("incomplete") else _fmt(results[m]["persona_score"])
                                    for m in models), style="bold")
    table.add_row("95% CI", *(f"{ci[0]:.2f}–{ci[1]:.2f}" if (ci := results[m].get("ci")) else "—" for m in models))
    table.add_row("refusal rate", *("—" if results[m]["refusal_rate"] is None else f"{results[m]['refusal_rate']:.0%}"
                                    for m in models))
    table.add_row("failed answers", *(f"{results[m].get('failed_answers', 0)}/{results[m].get('answers', 0)}"
                                      for m in models))
    if any(results[m].get("answers_at_token_limit") for m in models):  # older runs did not count them
        table.add_row("cut at token limit", *(f"{results[m].get('answers_at_token_limit', 0)}/"
                                              f"{results[m].get('answers', 0)}" for m in models))
    return table


def rich_table(table: Table, *, show_note: bool = True) -> RenderableType:
    """A :class:`Table` as a rich table (cells are plain text: run data never reaches rich markup).

    Numbers never wrap (their column is at least as wide as its longest value); headers and text wrap.
    A wide table with few rows is turned (see :class:`_Turned`); any other fits the width (:class:`_Rows`).
    """
    if len(table.columns) > 7 and len(table.rows) <= 6:
        return _Turned(table, show_note=show_note)
    return _Rows(table, show_note=show_note)


class _Rows:
    """A table in rows: text columns at least 10 wide where the width allows, else an equal share of it.

    The floor is set when rendering, as only then is the width known: 10 for each of seven text and
    number columns summed past a pipe's 80 columns, and rich cut the right-hand columns off (the control
    arms' verdicts read "clea").
    """

    def __init__(self, table: Table, *, show_note: bool) -> None:
        self.table = table
        self.show_note = show_note

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        table = self.table
        n = max(len(table.columns), 1)
        floor = max(1, min(10, (options.max_width - 1 - 3 * n) // n))  # less a border and padding per column
        note = Text(table.note) if self.show_note and table.note else None
        out = RichTable(title=Text(table.title), caption=note, caption_justify="left")
        cells = [[fmt(row.get(c.key), c.fmt) for c in table.columns] for row in table.rows]
        for i, column in enumerate(table.columns):
            longest = max((len(row[i]) for row in cells), default=1)
            numeric = column.fmt != "text"
            out.add_column(Text(column.label), justify="right" if numeric else "left", overflow="fold",
                           min_width=longest if numeric else min(longest, floor))
        for row, texts in zip(table.rows, cells, strict=True):
            out.add_row(*(Text(t) for t in texts), style="bold" if row.get("_total") else None)
        yield out


class _Turned:
    """A wide table with few rows, turned: one line per column, one column per row (like ``eval``'s).

    A row's column is headed by its name (its text cells: a model spec, a run), which people copy, so it
    is never cut (``terminal.key_column``). The width is only known when rendering: rows whose columns do
    not fit beside each other go on into another turned table below, with the same lines.
    """

    def __init__(self, table: Table, *, show_note: bool) -> None:
        self.table = table
        self.show_note = show_note

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        labels = [c for c in self.table.columns if c.fmt == "text"]
        values = [c for c in self.table.columns if c.fmt != "text"]
        label_width = max((len(c.label) for c in values), default=0)
        columns = []  # (name, cells, width) per row
        for row in self.table.rows:
            name = " · ".join(str(row.get(c.key)) for c in labels if row.get(c.key) not in (None, "")) or "—"
            cells = [fmt(row.get(c.key), c.fmt) for c in values]
            columns.append((name, cells, max(len(name), *(len(cell) for cell in cells))))
        groups: list[list[tuple[str, list[str], int]]] = [[]]
        used = label_width + 4  # a cell's padding (2) and border (1), and the closing border
        for column in columns:
            if groups[-1] and used + column[2] + 3 > options.max_width:
                groups.append([])
                used = label_width + 4
            groups[-1].append(column)
            used += column[2] + 3
        for i, group in enumerate(groups):
            last = i == len(groups) - 1
            note = self.table.note if last and self.show_note else ""
            out = RichTable(title=Text(self.table.title) if i == 0 else None, caption_justify="left",
                            caption=Text(note) if note else None)
            out.add_column("")  # wraps before a name is cut
            for name, cells, _ in group:
                key_column(out, Text(name), cells, justify="right")
            for j, column in enumerate(values):
                out.add_row(Text(column.label), *(Text(cells[j]) for _, cells, _ in group))
            yield out


def _eval_view(run: Run) -> list[RenderableType]:
    parts: list[RenderableType] = [render_summary(run.summary)]
    rows = headline(run)
    extra = RichTable(title="Refusals, verdicts and judge agreement")
    key_column(extra, "model", (row["model"] for row in rows))
    for label in ("refusal rate", "failed answers", "failed verdicts", "judge α (ordinal)", "answers",
                  "cut at token limit"):
        extra.add_column(label, justify="right", overflow="fold")
    for row in rows:
        extra.add_row(Text(row["model"]), fmt(row["refusal_rate"], "pct"), fmt(row["failed_answers"], "int"),
                      f"{fmt(row['failed_verdicts'], 'int')} of {fmt(row['verdicts'], 'int')}",
                      fmt(row["judge_alpha"], "float"), fmt(row["answers"], "int"),
                      fmt(row["answers_at_token_limit"], "int"))
    parts.append(extra)
    agreement = run.summary.get("judge_agreement") or {}
    means = run.summary.get("per_judge_mean") or {}
    if agreement.get("judges"):
        text = Text("judges: " + ", ".join(f"{j} (mean {fmt(means.get(j), 'score')})" for j in agreement["judges"])
                    + f" · Krippendorff's α over all answers: {fmt(agreement.get('krippendorff_alpha_ordinal'), 'float')}",
                    style="dim")
        parts.append(text)
    return parts


def usage_table(run: Run) -> Table | None:
    """Tokens, model time and cost per role and model over every call stored in the run, with a total."""
    rows = [dict(r) for r in cost_rows(run.calls)]
    if not rows:
        return None
    total, unknown = total_cost(rows)
    rows.append({"role": "total", "model": "", "_total": True,
                 **{k: sum(r[k] or 0 for r in rows) for k in ("calls", "input_tokens", "output_tokens", "latency_s")},
                 "cost": None if unknown and not total else total})
    return Table("Calls stored in the run (tokens, model time, cost)", [
        Column("role", "role"), Column("model", "model"), Column("calls", "calls", "int"),
        Column("input_tokens", "input tokens", "int"), Column("output_tokens", "output tokens", "int"),
        Column("latency_s", "model time", "seconds"), Column("cost", "cost", "usd"),
    ], rows, note="+ unknown: some model has no known price." if unknown else "")


def _usage(run: Run) -> list[RenderableType]:
    table = usage_table(run)
    if table is None:
        return []
    parts: list[RenderableType] = [rich_table(table)]
    summary = run.summary
    if summary.get("wall_time_s") is not None or summary.get("llm_calls") is not None:
        parts.append(Text(
            f"last invocation: wall time {fmt(summary.get('wall_time_s'), 'seconds')} · LLM calls sent "
            f"{fmt(summary.get('llm_calls'), 'int')} · cache hits {fmt(summary.get('cache_hits'), 'int')}",
            style="dim"))
    return parts


def _provenance(run: Run) -> list[RenderableType]:
    """What the numbers depend on besides the config: libraries, data files, weights (dim, wrapped)."""
    labels = {"versions": "libraries", "data_files": "data files", "weights": "weights (sha256)"}
    lines = [f"{label}: " + " · ".join(f"{name} {value}" for name, value in run.meta[key].items())
             for key, label in labels.items() if isinstance(run.meta.get(key), dict) and run.meta[key]]
    return [Text("\n".join(["provenance", *lines]), style="dim")] if lines else []


def comparison_table(comparison: Any) -> RichTable:
    """A compact rich table of a :class:`~personagraph.report.compare.Comparison`."""
    out = RichTable(title=Text(f"B − A: {comparison.model_b} vs {comparison.model_a}"), box=box.SIMPLE_HEAD,
                    pad_edge=False, collapse_padding=True)
    for label in ("task", "n", "A", "B", "B − A", "95% CI", "W/L/T", "p", "p Holm", "verdict"):
        text = label in ("task", "verdict")
        out.add_column(label, justify="left" if text else "right", no_wrap=not text, overflow="fold",
                       min_width=9 if label == "task" else 7 if label == "verdict" else None)
    for t in [*comparison.tasks, comparison.overall]:
        ci = "—" if t.ci_low is None else f"{t.ci_low:.2f}…{t.ci_high:.2f}"
        diff = "—" if t.diff is None else f"{t.diff:+.2f}"
        word = {"no clear difference": "unclear", "too few questions": "too few"}.get(verdict(t), verdict(t))
        style = "green" if word == "B better" else "red" if word == "A better" else None
        if t is comparison.overall:
            out.add_section()
        out.add_row(Text(t.task), str(t.n), fmt(t.mean_a, "score"), fmt(t.mean_b, "score"), diff, ci,
                    f"{t.wins_b}/{t.wins_a}/{t.ties}", fmt(t.p_value, "p"), fmt(t.p_holm, "p"), Text(word, style=style))
    return out


def _is_eval_table(table: Table) -> bool:
    return bool(table.rows) and "_tasks" in table.rows[0]


def view(run: Run) -> RenderableType:
    """Everything ``personagraph view`` prints for one run."""
    parts: list[RenderableType] = [Text(f"{run.path} · {run.kind}", style="bold")]
    if run.in_progress:
        parts.append(Text(f"⚠ {run.in_progress}", style="bold yellow"))
    if run.is_eval:
        parts += _eval_view(run)
    check = judge_check_of(run)
    parts += [rich_table(table) for table in judge_validity_tables(check)]
    if not run.is_eval:  # an eval run shows the verdict lines under its PersonaScore table
        parts += [Text(line, style="bold red" if warn else "green") for line, warn in judge_verdicts(check)]
    parts += [rich_table(table) for table in headline_tables([run]) if not (run.is_eval and _is_eval_table(table))]
    parts += _usage(run)
    if len(parts) == 1 + bool(run.in_progress):
        kinds = ", ".join(f"{k} ({n})" for k, n in sorted((k, len(v)) for k, v in run.records.items())) or "none"
        parts.append(Text(f"no scores to show yet; stored records: {kinds}", style="yellow"))
    return Group(*parts, *_provenance(run))


def escape_markup(text: Any) -> str:
    """Run data for rich markup strings."""
    return escape(str(text))
