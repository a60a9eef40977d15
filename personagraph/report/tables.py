"""Tables as data: columns with formats and rows of raw values, rendered to HTML, rich, CSV, JSON, Markdown.

The headline table of a run kind is built here once; ``report``, ``view`` and ``--format`` all print it.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass, field
from typing import Any, Literal

from personagraph.errors import PersonagraphError

Format = Literal["text", "score", "float", "slope", "pct", "int", "usd", "seconds", "p"]
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
    if kind == "slope":  # a signed change, two decimals; one that rounds to zero is 0.00, never -0.00
        rounded = round(float(value), 2)
        return f"{rounded:+.2f}" if rounded else "0.00"
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
