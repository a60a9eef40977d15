"""Untrusted text on the terminal: model replies, memories, ids and file names people or models wrote.

Such text reaches the terminal through :func:`plain` only: escape sequences (clear screen, window title,
OSC 8 links, cursor moves) and other control characters are shown as visible ``\\x1b``-style escapes, and
the result is a rich ``Text``, which rich never parses as markup (``[/]`` or ``[link=…]`` print as typed).
Newlines and tabs stay. Templates with our own markup keep it and put untrusted parts in with ``plain``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from rich.table import Table
from rich.text import Text

_CONTROL = re.compile("[\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f\\u2028\\u2029\\u202a-\\u202e\\u2066-\\u2069]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def neutralise(text: str) -> str:
    """``text`` with every control character (C0 but newline and tab, C1, bidi overrides) as a visible escape."""
    return _CONTROL.sub(_visible, text)


def plain(*parts: str | Text, style: str | None = None) -> Text:
    """One rich Text of ``parts``: strings are neutralised and never read as markup; Text parts keep their style."""
    out = Text(style=style or "")
    for part in parts:
        out.append(part if isinstance(part, Text) else neutralise(str(part)))
    return out


def key_column(table: Table, header: str | Text, values: Iterable[str], **options: Any) -> None:
    """Adds a column of cells people copy (model specs, ids): as wide as its longest value and never cut
    or wrapped, however narrow the terminal or pipe (80 columns); the table's other columns give way.
    A ``Text`` header is shown as it is (never read as markup) and never cut either."""
    width = max((len(value) for value in values), default=0)
    header_width = len(header.plain if isinstance(header, Text) else header)
    table.add_column(header, no_wrap=True, min_width=max(width, header_width), **options)
