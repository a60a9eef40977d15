"""The metric families' CSV/TSV input and JSONL output, with errors that name the file and row.

CSV/TSV rows are numbered the way a person finds them: 1 = first row after the header. JSONL input
is read by :func:`personagraph.files.read_jsonl`.
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from personagraph.errors import PersonagraphError
from personagraph.files import read_text, write_output

csv.field_size_limit(min(sys.maxsize, 2**31 - 1))  # profiles and long contexts exceed the 128 KiB default


def read_table(
    path: str | Path, required: Sequence[str], *, delimiter: str | None = None
) -> list[tuple[int, dict[str, str]]]:
    """Reads a CSV or TSV file with a header row.

    Args:
        path: the file.
        required: columns that must be in the header.
        delimiter: ``","`` or ``"\\t"``; by default from the suffix (``.tsv`` → tab, else comma).

    Returns:
        ``(row_number, row)`` pairs; row 1 is the first data row; cells are strings ("" when absent).

    Raises:
        PersonagraphError: missing or empty file, missing columns, a row with more cells than the header.
    """
    path = Path(path)
    if delimiter is None:
        delimiter = "\t" if path.suffix.lower() in {".tsv", ".tab"} else ","
    text = read_text(path)
    if not text.strip():
        raise PersonagraphError(f"{path}: empty file")
    quoting = csv.QUOTE_NONE if delimiter == "\t" else csv.QUOTE_MINIMAL
    reader = csv.DictReader(text.splitlines(keepends=True), delimiter=delimiter, quoting=quoting)
    header = [name.strip() for name in (reader.fieldnames or [])]
    reader.fieldnames = header
    missing = [name for name in required if name not in header]
    if missing:
        raise PersonagraphError(
            f"{path}: missing column{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
            f"(header has: {', '.join(header) or 'nothing'})"
        )
    rows: list[tuple[int, dict[str, str]]] = []
    for number, row in enumerate(reader, start=1):
        if None in row:
            raise PersonagraphError(f"{path} row {number}: more cells than the header has columns")
        rows.append((number, {key: (value or "") for key, value in row.items()}))
    if not rows:
        raise PersonagraphError(f"{path}: empty file (a header but no rows)")
    return rows


def write_jsonl(path: str | Path, records: Sequence[dict[str, Any]]) -> None:
    """Writes records as JSONL (UTF-8, one object per line), creating parent folders; the file appears
    whole or not at all (written beside it, then renamed), so a failure leaves no truncated output."""
    write_output(path, "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records))
