"""Reading input files people hand us (UTF-8 text and JSONL) and writing the output files they name, with
one wording for every problem.

Every error is a one-line :class:`~personagraph.errors.PersonagraphError` naming the file (and line):

* ``{path}: no such file`` / ``{path}: cannot read ({reason})``
* ``{path}: is a directory`` / ``{path}: not a regular file ({kind}); save the input to a file first`` — a
  FIFO, device or socket would hang or never end
* ``{path}: too large ({n} MB; the limit is {limit} MB)`` — see :data:`MAX_INPUT_BYTES`
* ``{path}: not UTF-8 text (byte {n})`` — ``n`` is the 0-based byte offset in the file
* ``{path}:{line}: invalid JSON ({reason})`` — also for nesting deeper than :data:`MAX_JSON_DEPTH`
* ``{path}:{line}: not valid Unicode (unpaired surrogate \\udXXX)`` — a ``\\ud800`` escape alone
* ``{path}:{line}: expected a JSON object, got {type}`` (``array``, ``string``, ``number``, ...)
* ``{path}: empty file (no records)``

Output files (:func:`write_output`): ``{path}: is a directory``, ``{path}: not a
regular file ({kind}); give a file to write``, ``{path}: a SQLite database (a run store?); give another file
to write``, ``{path}: a file of the run directory {dir} …`` (an existing file inside a run directory is never
overwritten: ``-o RUN/summary.json`` would destroy the run's summary), ``{path}: cannot write ({reason})``. An
output appears whole or not at all, and never through a link (:func:`write_atomic`).

Lines are numbered from 1 and split on ``\\n`` only, the way an editor counts them; a UTF-8 byte-order
mark is dropped; blank lines are skipped.
"""

from __future__ import annotations

import json
import os
import re
import stat
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from personagraph.errors import PersonagraphError

_JSON_TYPES = {dict: "object", list: "array", str: "string", int: "number", float: "number", bool: "boolean"}

MAX_INPUT_BYTES = 512 * 2**20
"""Largest input file read (512 MiB): parsed JSON takes several times its size in memory."""
MAX_JSON_DEPTH = 100
"""Deepest nesting of arrays/objects accepted in one JSON value; no input format needs more than a few."""
_OPENERS = re.compile(r'"(?:\\.|[^"\\])*"|([\[{])|([\]}])')
_SURROGATE = re.compile("[\ud800-\udfff]")
_SPECIAL = {stat.S_ISFIFO: "a FIFO", stat.S_ISCHR: "a character device", stat.S_ISBLK: "a block device",
            stat.S_ISSOCK: "a socket"}


SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
"""An id that may name a file: letters, digits, ``.``, ``_``, ``-`` (no separators, no leading dot)."""


def safe_id(value: Any, where: str) -> str:
    """``value`` when it is a :data:`SAFE_ID` without ``..``; ids read from files become file names.

    Raises:
        PersonagraphError: ``{where}: {value!r} is not a safe id (...)`` — e.g. ``../../x`` or ``/tmp/x``.
    """
    if isinstance(value, str) and SAFE_ID.fullmatch(value) and ".." not in value:
        return value
    raise PersonagraphError(
        f"{where}: {value!r} is not a safe id (letters, digits, '.', '_' and '-', at most 128, no '..')"
    )


def _regular_file(path: Path, name: str, action: str, fix: str) -> os.stat_result | None:
    """``path``'s stat when it is a regular file, None when it does not exist; anything else is one line naming
    ``name``: a directory, or a FIFO, device or socket (opening one blocks or never ends), with ``fix``."""
    try:
        info = path.stat()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise PersonagraphError(f"{name}: cannot {action} ({exc.strerror or exc})") from None
    if stat.S_ISDIR(info.st_mode):
        raise PersonagraphError(f"{name}: is a directory")
    if not stat.S_ISREG(info.st_mode):
        kind = next((kind for test, kind in _SPECIAL.items() if test(info.st_mode)), "special file")
        raise PersonagraphError(f"{name}: not a regular file ({kind}); {fix}")
    return info


def check_input_file(path: str | Path) -> Path:
    """Refuses what cannot be read as an input file, before opening it (opening a FIFO blocks).

    Raises:
        PersonagraphError: missing, a directory, a FIFO/device/socket, larger than :data:`MAX_INPUT_BYTES`.
    """
    path = Path(path)
    info = _regular_file(path, str(path), "read", "save the input to a file first")
    if info is None:
        raise PersonagraphError(f"{path}: no such file")
    if info.st_size > MAX_INPUT_BYTES:
        raise PersonagraphError(
            f"{path}: too large ({info.st_size / 2**20:.0f} MB; the limit is {MAX_INPUT_BYTES // 2**20} MB)"
        )
    return path


_SQLITE_HEADER = b"SQLite format 3\x00"
_RUN_MARKER = "run.sqlite"  # a folder holding this is a run directory (store.STORE_FILE; files.py sits below store.py)
RUN_FOLDERS = ("transcripts", "judge-check")  # a run's own folders (never a link: see store.refuse_links)
_UMASK = os.umask(0o022)
os.umask(_UMASK)  # read once: mkstemp makes files 0600, outputs get the permissions open() would give them


def write_atomic(path: str | Path, text: str) -> Path:
    """Writes ``text`` (UTF-8) to ``path`` whole or not at all, never through a link: into a new temporary file
    beside it (created exclusively, so a planted name cannot redirect it), then renamed over ``path`` (a link
    there is replaced, its target left as it was).

    Raises:
        OSError: the file cannot be written (the temporary file is removed).
    """
    path = Path(path)
    fd, partial = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(partial, path)
    except BaseException:
        Path(partial).unlink(missing_ok=True)
        raise
    return path


def _run_dir_of(path: Path) -> Path | None:
    """The run directory ``path`` lies in (its folder holds a run store), if any."""
    folder = path.parent
    candidates = [folder, folder.parent] if folder.name in RUN_FOLDERS else [folder]
    return next((candidate for candidate in candidates if (candidate / _RUN_MARKER).exists()), None)


def check_output_file(path: str | Path, label: str | None = None, *, keep_run_files: bool = False) -> Path:
    """Refuses what must not be written as an output file, before any work: a directory, a FIFO, device or
    socket (writing would block or go nowhere), and a SQLite database — a run store's results are never
    overwritten by a mistyped ``-o``. ``label`` names the file in errors (default: the path).
    ``keep_run_files`` (an output people named: ``-o``): an existing file, or a link, inside a run directory
    is refused too (``-o RUN/summary.json`` would destroy the run's summary); a new file there is fine."""
    path = Path(path)
    name = label or str(path)
    if keep_run_files and path.is_symlink() and (run_dir := _run_dir_of(path)) is not None:
        raise PersonagraphError(f"{name}: a symbolic link in the run directory {run_dir}; give a new file to write")
    if _regular_file(path, name, "write", "give a file to write") is None:
        return path
    try:
        with path.open("rb") as existing:
            header = existing.read(len(_SQLITE_HEADER))
    except OSError:
        header = b""
    if header == _SQLITE_HEADER:
        raise PersonagraphError(f"{name}: a SQLite database (a run store?); give another file to write")
    if keep_run_files and (run_dir := _run_dir_of(path)) is not None:
        raise PersonagraphError(
            f"{name}: a file of the run directory {run_dir} (its results are never overwritten); give a new file "
            "or a path outside the run directory"
        )
    return path


def write_output(path: str | Path, text: str, label: str | None = None, *, keep_run_files: bool = False) -> Path:
    """Writes ``text`` (UTF-8) to an output file people named, creating parent folders; the file appears
    whole or not at all (written beside it, then renamed), so a failure leaves no truncated output.

    Raises:
        PersonagraphError: what :func:`check_output_file` refuses, or the file cannot be written.
    """
    path = check_output_file(path, label, keep_run_files=keep_run_files)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, text)
    except OSError as exc:
        raise PersonagraphError(f"{label or path}: cannot write ({exc.strerror or exc})") from None
    return path


def _open(path: Path) -> IO[bytes]:
    check_input_file(path)
    try:
        return path.open("rb")
    except FileNotFoundError:
        raise PersonagraphError(f"{path}: no such file") from None
    except OSError as exc:
        raise PersonagraphError(f"{path}: cannot read ({exc.strerror or exc})") from None


def _json_depth(text: str) -> int:
    """Deepest bracket nesting outside strings (a linear scan: json.loads would recurse first)."""
    depth = deepest = 0
    for match in _OPENERS.finditer(text):
        if match.group(1):
            depth += 1
            deepest = max(deepest, depth)
        elif match.group(2):
            depth -= 1
    return deepest


def lone_surrogate(value: Any) -> str | None:
    """The first unpaired surrogate in any string of a parsed JSON value (they cannot be encoded)."""
    if isinstance(value, str):
        found = _SURROGATE.search(value)
        return f"\\u{ord(found.group()):04x}" if found else None
    if isinstance(value, dict):
        value = [*value.keys(), *value.values()]
    if isinstance(value, list):
        return next((s for item in value if (s := lone_surrogate(item))), None)
    return None


class _DuplicateKey(Exception):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object, refused when it names a key twice (json.loads would silently keep the last value)."""
    value = dict(pairs)
    if len(value) < len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return value


def parse_json(text: str, path: str | Path, *, line: int | None = None) -> Any:
    """``json.loads`` for input text, with one-line errors naming ``path`` (and ``line`` of a JSONL file).

    Refuses, beside invalid JSON, nesting deeper than :data:`MAX_JSON_DEPTH` (a RecursionError otherwise),
    an object that names a key twice, and strings holding an unpaired surrogate such as ``"\\ud800"`` (not
    encodable, so not storable).
    """
    where = f"{path}:{line}" if line is not None else str(path)
    if text.count("[") + text.count("{") > MAX_JSON_DEPTH and _json_depth(text) > MAX_JSON_DEPTH:
        raise PersonagraphError(f"{where}: invalid JSON (nested deeper than {MAX_JSON_DEPTH} levels)")
    try:
        value = json.loads(text, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as exc:
        at = f" at line {exc.lineno}" if line is None else ""
        raise PersonagraphError(f"{where}: invalid JSON{at} ({exc.msg})") from None
    except ValueError as exc:  # an integer past Python's digit limit (sys.get_int_max_str_digits)
        raise PersonagraphError(f"{where}: invalid JSON ({_too_long_number(exc)})") from None
    except RecursionError:
        raise PersonagraphError(f"{where}: invalid JSON (nested too deeply)") from None
    except _DuplicateKey as exc:
        raise PersonagraphError(f"{where}: invalid JSON (the key {exc.args[0]!r} is given twice)") from None
    if "\\u" in text and (surrogate := lone_surrogate(value)):
        raise PersonagraphError(f"{where}: not valid Unicode (unpaired surrogate {surrogate})")
    return value


def parse_yaml(text: str, path: str | Path) -> Any:
    """``yaml.safe_load`` for input text, with one-line errors naming ``path`` (and the line): invalid YAML,
    and nesting deeper than :data:`MAX_JSON_DEPTH` — counted on the parser's events first, which never
    recurse (the loader builds nested values recursively: 5000 levels were a RecursionError)."""
    import yaml  # only for YAML inputs

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: ~100× faster on deep input
    opening, closing = (yaml.SequenceStartEvent, yaml.MappingStartEvent), (yaml.SequenceEndEvent, yaml.MappingEndEvent)
    try:
        depth = 0
        for event in yaml.parse(text, Loader=loader):
            if isinstance(event, opening):
                depth += 1
                if depth > MAX_JSON_DEPTH:
                    line = event.start_mark.line + 1 if event.start_mark else None
                    where = f"{path}:{line}" if line else str(path)
                    raise PersonagraphError(f"{where}: invalid YAML (nested deeper than {MAX_JSON_DEPTH} levels)")
            elif isinstance(event, closing):
                depth -= 1
        return yaml.load(text, Loader=loader)  # noqa: S506 - a safe loader (CSafeLoader or SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise PersonagraphError(f"{where}: invalid YAML") from None
    except RecursionError:
        raise PersonagraphError(f"{path}: invalid YAML (nested too deeply)") from None
    except ValueError as exc:  # an integer past Python's digit limit, a date out of range
        raise PersonagraphError(f"{path}: invalid YAML ({_too_long_number(exc)})") from None


def _too_long_number(exc: ValueError) -> str:
    """What a ``ValueError`` of a JSON or YAML loader says, in a few words: "a number of 5000 digits"."""
    found = re.search(r"value has (\d+) digits", str(exc))
    return f"a number of {found.group(1)} digits" if found else str(exc).splitlines()[0][:80]


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
            data = handle.read(MAX_INPUT_BYTES + 1)
        except OSError as exc:
            raise PersonagraphError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if len(data) > MAX_INPUT_BYTES:  # grew since it was checked
        raise PersonagraphError(f"{path}: too large (the limit is {MAX_INPUT_BYTES // 2**20} MB)")
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
        value = parse_json(line, path, line=number)
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


def read_json(path: str | Path) -> Any:
    """A whole-file JSON value (UTF-8, byte-order mark dropped), checked as :func:`parse_json` does.

    Raises:
        PersonagraphError: as :func:`read_text`, and for invalid JSON (``{path}: invalid JSON (...)``).
    """
    return parse_json(read_text(path), path)


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
