"""Reading input files people hand us: UTF-8 text and JSONL, with one wording for every problem.

Every error is a one-line :class:`~personagraph.errors.PersonagraphError` naming the file (and line):

* ``{path}: no such file`` / ``{path}: is a directory`` / ``{path}: cannot read ({reason})``
* ``{path}: not UTF-8 text (byte {n})`` — ``n`` is the 0-based byte offset in the file
* ``{path}:{line}: invalid JSON ({reason})``
* ``{path}:{line}: expected a JSON object, got {type}`` (``array``, ``string``, ``number``, ...)
* ``{path}: empty file (no records)``

Lines are numbered from 1 and split on ``\\n`` only, the way an editor counts them; a UTF-8 byte-order
mark is dropped; blank lines are skipped.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from personagraph.errors import PersonagraphError

_JSON_TYPES = {dict: "object", list: "array", str: "string", int: "number", float: "number", bool: "boolean"}


def _open(path: Path) -> IO[bytes]:
    if path.is_dir():
        raise PersonagraphError(f"{path}: is a directory")
    try:
        return path.open("rb")
    except FileNotFoundError:
        raise PersonagraphError(f"{path}: no such file") from None
    except OSError as exc:
        raise PersonagraphError(f"{path}: cannot read ({exc.strerror or exc})") from None


def _not_utf8(path: Path, offset: int) -> PersonagraphError:
    return PersonagraphError(f"{path}: not UTF-8 text (byte {offset})")


def read_text(path: str | Path) -> str:
    """The whole file as text (UTF-8, byte-order mark dropped).

    Raises:
        PersonagraphError: missing file, a directory, an unreadable file, bytes that are not UTF-8.
    """
    path = Path(path)
    with _open(path) as handle:
        try:
            data = handle.read()
        except OSError as exc:
            raise PersonagraphError(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise _not_utf8(path, exc.start) from None


def _file_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of a file, read one line at a time."""
    with _open(path) as handle:
        offset = 0
        try:
            for number, raw in enumerate(handle, start=1):
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise _not_utf8(path, offset + exc.start) from None
                offset += len(raw)
                yield number, line.removeprefix("\ufeff") if number == 1 else line
        except OSError as exc:
            raise PersonagraphError(f"{path}: cannot read ({exc.strerror or exc})") from None


def _records(lines: Iterable[tuple[int, str]], path: Path, objects: bool) -> Iterator[tuple[int, Any]]:
    for number, line in lines:
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise PersonagraphError(f"{path}:{number}: invalid JSON ({exc.msg})") from None
        if objects and not isinstance(value, dict):
            kind = "null" if value is None else _JSON_TYPES.get(type(value), type(value).__name__)
            raise PersonagraphError(f"{path}:{number}: expected a JSON object, got {kind}")
        yield number, value


def iter_jsonl(path: str | Path, *, objects: bool = False) -> Iterator[tuple[int, Any]]:
    """Streams a JSONL file: ``(line number, value)`` pairs, blank lines skipped, one line in memory.

    Args:
        path: the file.
        objects: every value must be a JSON object.

    Raises:
        PersonagraphError: as :func:`read_text`, and for a line that is not JSON (or not an object).
    """
    path = Path(path)
    return _records(_file_lines(path), path, objects)


def read_jsonl(
    path: str | Path, *, text: str | None = None, objects: bool = False, allow_empty: bool = True
) -> list[tuple[int, Any]]:
    """Reads a JSONL file (or ``text`` already read from it): ``(line number, value)`` pairs.

    Args:
        path: the file; with ``text``, only named in errors.
        text: the file's contents, when the caller has read them already (see :func:`read_text`).
        objects: every value must be a JSON object.
        allow_empty: False makes a file without records (empty or blank lines only) an error.

    Raises:
        PersonagraphError: as :func:`iter_jsonl`, and for an empty file unless ``allow_empty``.
    """
    path = Path(path)
    lines = _file_lines(path) if text is None else enumerate(text.split("\n"), start=1)
    rows = list(_records(lines, path, objects))
    if not rows and not allow_empty:
        raise PersonagraphError(f"{path}: empty file (no records)")
    return rows
