"""personagraph.files: the one reader of text and JSONL input, one wording per problem."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from personagraph.errors import PersonagraphError
from personagraph import files
from personagraph.files import iter_jsonl, read_json, read_jsonl, read_text


def _error(call, *args, **kwargs) -> str:
    with pytest.raises(PersonagraphError) as info:
        call(*args, **kwargs)
    message = str(info.value)
    assert "\n" not in message
    return message


READERS = [read_text, read_jsonl, lambda path: list(iter_jsonl(path))]


@pytest.mark.parametrize("reader", READERS)
def test_missing_file(tmp_path: Path, reader) -> None:
    path = tmp_path / "absent.jsonl"
    assert _error(reader, path) == f"{path}: no such file"


@pytest.mark.parametrize("reader", READERS)
def test_directory(tmp_path: Path, reader) -> None:
    assert _error(reader, tmp_path) == f"{tmp_path}: is a directory"


@pytest.mark.parametrize("reader", READERS)
def test_not_utf8_names_the_byte_offset(tmp_path: Path, reader) -> None:
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(b'"ok"\n"caf\xe9"\n')
    assert _error(reader, path) == f"{path}: not UTF-8 text (byte 9)"


def test_not_utf8_offset_counts_the_bom(tmp_path: Path) -> None:
    path = tmp_path / "bom.txt"
    path.write_bytes(b"\xef\xbb\xbf\xff")
    for reader in READERS:
        assert _error(reader, path) == f"{path}: not UTF-8 text (byte 3)"


@pytest.mark.skipif(not hasattr(__import__("os"), "geteuid") or __import__("os").geteuid() == 0,
                    reason="root reads anything")
def test_unreadable_file(tmp_path: Path) -> None:
    path = tmp_path / "locked.txt"
    path.write_text("x")
    path.chmod(0)
    try:
        assert _error(read_text, path) == f"{path}: cannot read (Permission denied)"
    finally:
        path.chmod(0o600)


def test_bom_is_dropped(tmp_path: Path) -> None:
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"a": 1}\r\n{"a": 2}\n')
    assert read_text(path) == '{"a": 1}\r\n{"a": 2}\n'
    assert read_jsonl(path) == [(1, {"a": 1}), (2, {"a": 2})]
    assert list(iter_jsonl(path)) == [(1, {"a": 1}), (2, {"a": 2})]


def test_blank_lines_are_skipped_and_lines_keep_their_numbers(tmp_path: Path) -> None:
    path = tmp_path / "gaps.jsonl"
    path.write_text('\n{"a": 1}\n   \n\t\n"text"\n\n')
    assert read_jsonl(path) == [(2, {"a": 1}), (5, "text")]
    assert list(iter_jsonl(path)) == [(2, {"a": 1}), (5, "text")]
    assert read_jsonl(path, text=path.read_text()) == [(2, {"a": 1}), (5, "text")]


def test_a_line_separator_inside_a_string_is_not_a_new_line(tmp_path: Path) -> None:
    path = tmp_path / "sep.jsonl"
    path.write_text('{"a": "x\u2028y"}\n{"a": 2}\n', encoding="utf-8")
    assert read_jsonl(path) == [(1, {"a": "x\u2028y"}), (2, {"a": 2})]


@pytest.mark.parametrize("from_text", [False, True])
def test_invalid_json_names_file_and_line(tmp_path: Path, from_text: bool) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"a": 1}\n\n{"a": \n')
    text = path.read_text() if from_text else None
    assert _error(read_jsonl, path, text=text) == f"{path}:3: invalid JSON (Expecting value)"
    if not from_text:
        assert _error(lambda p: list(iter_jsonl(p)), path) == f"{path}:3: invalid JSON (Expecting value)"


@pytest.mark.parametrize(
    ("line", "kind"),
    [("[1, 2]", "array"), ('"s"', "string"), ("3", "number"), ("2.5", "number"), ("true", "boolean"),
     ("null", "null")],
)
def test_objects_required(tmp_path: Path, line: str, kind: str) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text(f'{{"a": 1}}\n{line}\n')
    assert read_jsonl(path)[1][0] == 2  # any JSON value is fine by default
    expected = f"{path}:2: expected a JSON object, got {kind}"
    assert _error(read_jsonl, path, objects=True) == expected
    assert _error(lambda p: list(iter_jsonl(p, objects=True)), path) == expected


@pytest.mark.parametrize("content", ["", "\n\n  \n"])
def test_empty_file(tmp_path: Path, content: str) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text(content)
    assert read_jsonl(path) == []
    assert _error(read_jsonl, path, allow_empty=False) == f"{path}: empty file (no records)"
    assert _error(read_jsonl, path, text=content, allow_empty=False) == f"{path}: empty file (no records)"


def test_iter_jsonl_streams(tmp_path: Path) -> None:
    path = tmp_path / "stream.jsonl"
    path.write_text('{"a": 1}\n{"a": \n')
    rows = iter_jsonl(path)
    assert next(rows) == (1, {"a": 1})  # the good line arrives before the bad one is read
    with pytest.raises(PersonagraphError, match=re.escape(f"{path}:2: invalid JSON")):
        next(rows)


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    for reader in READERS:
        assert _error(reader, fifo) == f"{fifo}: not a regular file (a FIFO); save the input to a file first"


def test_a_device_is_refused() -> None:
    assert _error(read_text, "/dev/zero") == "/dev/zero: not a regular file (a character device); save the input to a file first"


def test_a_file_over_the_size_limit_is_refused(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "big.jsonl"
    path.write_text('{"a": 1}\n' * 300)
    monkeypatch.setattr(files, "MAX_INPUT_BYTES", 2**20)
    assert read_jsonl(path)[0] == (1, {"a": 1})
    monkeypatch.setattr(files, "MAX_INPUT_BYTES", 100)
    for reader in READERS:
        assert _error(reader, path) == f"{path}: too large (0 MB; the limit is 0 MB)"


@pytest.mark.parametrize("depth", [101, 100_000])
def test_deep_nesting_is_invalid_json(tmp_path: Path, depth: int) -> None:
    path = tmp_path / "deep.jsonl"
    path.write_text("[" * depth + "]" * depth + "\n")
    assert _error(read_jsonl, path) == f"{path}:1: invalid JSON (nested deeper than 100 levels)"
    assert _error(read_json, path) == f"{path}: invalid JSON (nested deeper than 100 levels)"


def test_brackets_inside_strings_do_not_count_as_nesting(tmp_path: Path) -> None:
    path = tmp_path / "brackets.jsonl"
    path.write_text(json.dumps({"text": "[" * 500 + '\\"{' * 200}) + "\n")
    assert read_jsonl(path)[0][1]["text"].startswith("[[[")


@pytest.mark.parametrize("escape", ["\\ud800", "\\udc80", "x\\ude00y"])
def test_a_lone_surrogate_is_refused(tmp_path: Path, escape: str) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text('{"ok": "fine"}\n{"q": ["' + escape + '"]}\n')
    assert re.fullmatch(rf"{re.escape(str(path))}:2: not valid Unicode \(unpaired surrogate \\ud[89a-f]\w\w\)",
                        _error(read_jsonl, path))


def test_a_surrogate_pair_is_an_ordinary_character(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text('{"q": "\\ud83d\\ude00"}\n')
    assert read_jsonl(path) == [(1, {"q": "😀"})]


@pytest.mark.parametrize("value", ["../../x", "/tmp/x", "a/b", "..", ".hidden", "", "a" * 129, "x\ny", 7, None])
def test_unsafe_ids_are_refused(value) -> None:
    assert _error(files.safe_id, value, "t.jsonl:1: id").startswith(f"t.jsonl:1: id: {value!r} is not a safe id")


@pytest.mark.parametrize("value", ["session-1", "abc_DEF.2", "a" * 128])
def test_safe_ids_pass(value: str) -> None:
    assert files.safe_id(value, "id") == value
