"""``personagraph view``: a run's headline numbers as rich tables in the terminal.

:func:`render_summary` is also the table ``personagraph eval`` prints when a run ends.
"""

from __future__ import annotations

from dataclasses import dataclass
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


def render_summary(summary: dict) -> RenderableType:
    """The task × model table printed at the end of a run (also used by ``view``)."""
    models = list(summary["models"])
    verdicts = judge_verdicts(summary.get("judge_check") or {})
    caption = Text("\n".join(f"{'⚠ ' if warn else ''}judge validity: {line}" for line, warn in verdicts),
                   style="bold red" if any(warn for _, warn in verdicts) else "green")
    results = summary["models"]

    def line(label: str, cell: Any, **options: Any) -> Line:
        return Line(label, [cell(results[m]) for m in models], **options)

    lines = [line(task, lambda r, task=task: _fmt(r["tasks"].get(task, {}).get("mean")))
             for task in TASK_NAMES]
    lines += [
        line("PersonaScore", lambda r: "incomplete" if r.get("incomplete") else _fmt(r["persona_score"]),
             style="bold", section=True),
        line("95% CI", lambda r: f"{ci[0]:.2f}–{ci[1]:.2f}" if (ci := r.get("ci")) else "—"),
        line("refusal rate", lambda r: "—" if r["refusal_rate"] is None else f"{r['refusal_rate']:.0%}"),
        line("failed answers", lambda r: f"{r.get('failed_answers', 0)}/{r.get('answers', 0)}"),
    ]
    if any(results[m].get("manipulation_flags") for m in models):  # answers that tried to grade themselves
        lines.append(line("flagged as grading itself",
                          lambda r: f"{r.get('manipulation_flags', 0)}/{r.get('answers', 0)}"))
    if any(results[m].get("answers_at_token_limit") for m in models):  # older runs did not count them
        lines.append(line("cut at token limit",
                          lambda r: f"{r.get('answers_at_token_limit', 0)}/{r.get('answers', 0)}"))
    return Columns("PersonaScore (1–5)", models, lines, caption=caption if verdicts else None)


NAME_CHARS = 24
"""A text column whose every cell is one word (a model spec, a role, an id, a flag) or at most this long
(a task name) holds names people copy: never wrapped nor cut. Other text (a reason, a verdict) wraps."""


def _names(cells: list[str]) -> bool:
    return all(len(cell) <= NAME_CHARS or len(cell.split()) == 1 for cell in cells)


def rich_table(table: Table, *, show_note: bool = True, turn: bool = True) -> RenderableType:
    """A :class:`Table` as a rich table (cells are plain text: run data never reaches rich markup).

    Numbers and names (see :data:`NAME_CHARS`) never wrap; headers and longer text do. A
    wide table with few rows is turned (a column per row: :class:`Columns`; ``turn=False``: never, for a
    table whose text columns are more than names); any other fits the width in rows, or, where its names
    and numbers cannot fit side by side, one block per row (:class:`_Rows`).
    """
    if turn and len(table.columns) > 7 and len(table.rows) <= 6:
        labels = [c for c in table.columns if c.fmt == "text"]
        values = [c for c in table.columns if c.fmt != "text"]
        names = [" · ".join(str(row.get(c.key)) for c in labels if row.get(c.key) not in (None, "")) or "—"
                 for row in table.rows]
        lines = [Line(c.label, [fmt(row.get(c.key), c.fmt) for row in table.rows]) for c in values]
        note = Text(table.note) if show_note and table.note else None
        return Columns(table.title, names, lines, caption=note)
    return _Rows(table, show_note=show_note)


class _Rows:
    """A table in rows. Numbers and names (see :data:`NAME_CHARS`) keep their whole width and the other
    text columns share what is left (at least 10 wide where the width allows); a table whose names and
    numbers alone are wider than the terminal is shown one block per row (``header: value`` lines).

    The layout is chosen when rendering, as only then is the width known.
    """

    def __init__(self, table: Table, *, show_note: bool) -> None:
        self.table = table
        self.show_note = show_note

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        table = self.table
        n = max(len(table.columns), 1)
        floor = max(1, min(10, (options.max_width - 1 - 3 * n) // n))  # less a border and padding per column
        note = Text(table.note) if self.show_note and table.note else None
        cells = [[fmt(row.get(c.key), c.fmt) for c in table.columns] for row in table.rows]
        widths = _column_widths(table, cells, floor, options.max_width - 1 - 3 * n)
        if widths is None:
            yield from self._blocks(cells, note)
            return
        out = RichTable(title=Text(table.title), caption=note, caption_justify="left")
        for column, width in zip(table.columns, widths, strict=True):
            out.add_column(Text(column.label), justify="left" if column.fmt == "text" else "right",
                           overflow="fold", width=width)  # set here: rich's own fitting cuts the right edge
        for row, texts in zip(table.rows, cells, strict=True):
            out.add_row(*(Text(t) for t in texts), style="bold" if row.get("_total") else None)
        yield out

    def _blocks(self, cells: list[list[str]], note: Text | None) -> RenderResult:
        """One block per row: each column's header and the row's value, the value never wrapped if whole."""
        table = self.table
        out = RichTable(title=Text(table.title), caption=note, caption_justify="left", show_header=False,
                        box=box.SIMPLE, show_edge=False)
        out.add_column("", no_wrap=True, style="dim")
        out.add_column("", overflow="fold")
        for r, (row, texts) in enumerate(zip(table.rows, cells, strict=True)):
            if r:
                out.add_section()
            for i, column in enumerate(table.columns):
                out.add_row(Text(column.label), Text(texts[i]), style="bold" if row.get("_total") else None)
        yield out


def _column_widths(table: Table, cells: list[list[str]], floor: int, room: int) -> list[int] | None:
    """Each column's width in ``room`` characters (the borders left out), or None when its numbers and names
    (never narrower than their longest cell) and the other columns (at least ``floor``) do not fit.

    A column is never narrower than its longest word (header or cell); what is left goes to the columns
    that want more (a header or text on one line), in proportion to what they want."""
    least, want = [], []
    for i, column in enumerate(table.columns):
        texts = [row[i] for row in cells]
        longest = max((len(text) for text in texts), default=1)
        word = max((len(w) for text in [column.label, *texts] for w in text.split()), default=1)
        whole = column.fmt != "text" or _names(texts)
        least.append(max(word, longest if whole else min(longest, floor)))
        want.append(max(least[-1], longest, len(column.label)))
    if sum(least) > room:
        return None
    spare, wanted = room - sum(least), sum(want) - sum(least)
    if wanted <= spare:
        return want
    return [low + (high - low) * spare // wanted for low, high in zip(least, want, strict=True)]


@dataclass(frozen=True)
class Line:
    """A line of :class:`Columns`: its label and a cell per column (``section``: a rule above it)."""

    label: str
    cells: list[str]
    style: str | None = None
    section: bool = False


class Columns:
    """Lines × named columns: a model's (or a run's) values side by side, one column each (``eval``'s
    PersonaScore table; a wide table with few rows, turned).

    A column is headed by its name (a model spec, a run), which people copy, so it is never cut
    (``terminal.key_column``), nor is a line's label (a task). The width is only known when rendering:
    columns that do not fit beside each other go on into another table below, with the same lines; a
    name wider than any column can be is numbered, and written whole in a legend under the table.
    """

    def __init__(self, title: str, names: list[str], lines: list[Line], *,
                 caption: Text | None = None) -> None:
        self.title = title
        self.names = names
        self.lines = lines
        self.caption = caption

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        label_width = max((len(line.label) for line in self.lines), default=0)
        room = options.max_width - label_width - 7  # the borders and padding of two columns
        legend = []
        columns = []  # (header, cells, width) per name
        for i, name in enumerate(self.names):
            cells = [line.cells[i] for line in self.lines]
            header = name
            if len(name) > room:
                header = f"({i + 1})"
                legend.append(f"{header} {name}")
            columns.append((header, cells, max(len(header), *(len(cell) for cell in cells))))
        groups: list[list[tuple[str, list[str], int]]] = [[]]
        used = label_width + 4  # the label cell's padding (2) and border (1), and the closing border
        for column in columns:
            if groups[-1] and used + column[2] + 3 > options.max_width:
                groups.append([])
                used = label_width + 4
            groups[-1].append(column)
            used += column[2] + 3
        for i, group in enumerate(groups):
            last = i == len(groups) - 1
            out = RichTable(title=Text(self.title) if i == 0 else None, caption_justify="left",
                            caption=self.caption if last else None)
            out.add_column("", no_wrap=True, min_width=label_width)
            for header, cells, _ in group:
                key_column(out, Text(header), cells, justify="right")
            for j, line in enumerate(self.lines):
                if line.section:
                    out.add_section()
                out.add_row(Text(line.label), *(Text(cells[j]) for _, cells, _ in group), style=line.style)
            yield out
        if legend:  # each name on a line of its own (folded only where it is wider than the terminal)
            yield Text("\n".join(legend), style="dim", overflow="fold")


def validity_text(summary: dict[str, Any]) -> Text | None:
    """Each judge's validity line (how its scores agreed with people, or how to measure that), or None."""
    lines = summary.get("judge_validity") or {}
    if not lines:
        return None
    text = Text()
    for i, line in enumerate(lines.values()):
        measured = "not measured against people" not in line
        text.append(("\n" if i else "") + ("judge " if measured else "⚠ judge ") + line,
                    style="dim" if measured else "yellow")
    return text


def _eval_view(run: Run) -> list[RenderableType]:
    parts: list[RenderableType] = [render_summary(run.summary)]
    rows = headline(run)
    parts.append(Columns("Refusals, verdicts and judge agreement", [row["model"] for row in rows], [
        Line("refusal rate", [fmt(row["refusal_rate"], "pct") for row in rows]),
        Line("flagged as grading itself", [fmt(row["manipulation_flags"], "int") for row in rows]),
        Line("failed answers", [fmt(row["failed_answers"], "int") for row in rows]),
        Line("failed verdicts", [f"{fmt(row['failed_verdicts'], 'int')} of {fmt(row['verdicts'], 'int')}"
                                 for row in rows]),
        Line("judge α (ordinal)", [fmt(row["judge_alpha"], "float") for row in rows]),
        Line("answers", [fmt(row["answers"], "int") for row in rows]),
        Line("cut at token limit", [fmt(row["answers_at_token_limit"], "int") for row in rows]),
    ]))
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
    """A compact rich table of a :class:`~personagraph.report.compare.Comparison` that fits 80 columns: one p
    column, the one each verdict reads (Holm-adjusted per task; the pooled row's own)."""
    out = RichTable(title=Text(f"B − A: {comparison.model_b} vs {comparison.model_a}"), box=box.SIMPLE_HEAD,
                    pad_edge=False, collapse_padding=True)
    words = {"task": max(len(w) for t in TASK_NAMES for w in t.split()), "verdict": len("B better")}
    for label in ("task", "n", "A", "B", "B − A", "95% CI", "W/L/T", "p", "verdict"):
        text = label in words  # a task name or a verdict wraps between its words, never inside one
        out.add_column(label, justify="left" if text else "right", no_wrap=not text, overflow="fold",
                       min_width=words.get(label))
    for t in [*comparison.tasks, comparison.overall]:
        ci = "—" if t.ci_low is None else f"{t.ci_low:.2f}…{t.ci_high:.2f}"
        word = {"no clear difference": "unclear", "too few questions": "too few"}.get(verdict(t), verdict(t))
        style = "green" if word == "B better" else "red" if word == "A better" else None
        if t is comparison.overall:
            out.add_section()
        p = t.p_value if t is comparison.overall else t.p_holm
        out.add_row(Text(t.task), str(t.n), fmt(t.mean_a, "score"), fmt(t.mean_b, "score"), fmt(t.diff, "slope"),
                    ci, f"{t.wins_b}/{t.wins_a}/{t.ties}", fmt(p, "p"), Text(word, style=style))
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
    if (validity := validity_text(run.summary)) is not None:
        parts.append(validity)
    parts += _usage(run)
    if len(parts) == 1 + bool(run.in_progress):
        kinds = ", ".join(f"{k} ({n})" for k, n in sorted((k, len(v)) for k, v in run.records.items())) or "none"
        parts.append(Text(f"no scores to show yet; stored records: {kinds}", style="yellow"))
    return Group(*parts, *_provenance(run))


def escape_markup(text: Any) -> str:
    """Run data for rich markup strings."""
    return escape(str(text))
