"""HTML building blocks of the report: escaped text, key–value lists and tables (run data is untrusted)."""

from __future__ import annotations

import html
from typing import Any

from personagraph.report.tables import Table, fmt


def esc(value: Any) -> str:
    """Run data as HTML text (``None`` → "—")."""
    return "—" if value is None else html.escape(str(value), quote=True)


def table_html(table: Table, *, caption: bool = False) -> str:
    """A :class:`Table` as an HTML table; numbers right-aligned and formatted, everything escaped."""
    head = "".join(f'<th class="{"" if c.fmt == "text" else "num"}">{esc(c.label)}</th>' for c in table.columns)
    body = []
    for row in table.rows:
        cls = ' class="total"' if row.get("_total") else ""
        cells = "".join(
            f'<td class="{"" if c.fmt == "text" else "num"}">{esc(fmt(row.get(c.key), c.fmt))}</td>'
            for c in table.columns
        )
        body.append(f"<tr{cls}>{cells}</tr>")
    title = f"<h3>{esc(table.title)}</h3>" if caption else ""
    note = f'<p class="note">{esc(table.note)}</p>' if table.note else ""
    return f'{title}<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>{note}'


def kv_html(pairs: list[tuple[str, Any]]) -> str:
    return '<dl class="kv">' + "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in pairs) + "</dl>"
