from pathlib import Path

import pytest

from personagraph.errors import PersonagraphError
from personagraph.personas import load_personas


def test_txt_jsonl_yaml(tmp_path: Path) -> None:
    (tmp_path / "p.txt").write_text("# comment\nA cowboy\n\nA nurse\nA cowboy\n")
    (tmp_path / "p.jsonl").write_text('"A cowboy"\n{"persona": "A nurse"}\n')
    (tmp_path / "p.yaml").write_text("personas:\n  - A cowboy\n  - description: A nurse\n")
    for name in ("p.txt", "p.jsonl", "p.yaml"):
        assert [p.description for p in load_personas(tmp_path / name)] == ["A cowboy", "A nurse"]


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("e.txt", b"", "no personas found"),
        ("b.txt", b"\x00\x01\x02", "binary file"),
        ("l1.txt", "caf\xe9".encode("latin-1"), "not UTF-8"),
        ("j.jsonl", b'"ok"\n{"persona": \n', r"j.jsonl:2: invalid JSON"),
        ("y.yaml", b"personas: [unclosed\n", "invalid YAML"),
        ("n.yaml", b"persona: x\n", "expected a list"),
        ("w.csv", b"a,b\n", "unsupported persona file type"),
        ("h.txt", b"x" * 5000, r"h.txt:1: persona is 5000 characters"),
        ("o.jsonl", b"42\n", "o.jsonl:1: expected a persona text"),
        ("z.txt", "A cowboy\n\u200b\u200d\n".encode(), r"z.txt:2: empty persona \(only invisible characters"),
        ("s.jsonl", b'{"persona": "  "}\n', r"s.jsonl:1: empty persona$"),
    ],
)
def test_bad_files_get_one_line_naming_the_file(tmp_path: Path, name: str, content: bytes, message: str) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(PersonagraphError, match=message) as info:
        load_personas(path)
    assert name in str(info.value) and "\n" not in str(info.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(PersonagraphError, match=r"absent.txt: no such file$"):
        load_personas(tmp_path / "absent.txt")
