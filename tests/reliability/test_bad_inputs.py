"""The red-team's bad inputs (../shared/findings/bad-inputs-2026-11-30.md), one test per class of case.

Every bad input ends in exit 2 with one line naming the file, field or value, leaves nothing behind
(no run directory, bank or output file) and never hangs; the bracket cases are valid input and exit 0.
Commands run in-process through the console entry point (``personagraph.cli.main``), except where a
case needs a real terminal stdin or could hang (FIFOs): those run as a subprocess with a timeout.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from personagraph.cli import main
from personagraph.runs.base import EXIT_INCOMPLETE

EVAL = ["eval", "-m", "test:agent", "-j", "test:judge", "--questions-per-task", "1", "--environments", "1",
        "--run-dir", "rd"]
Files = dict[str, str | Callable[[Path], None]]


@dataclass
class Case:
    id: str
    argv: list[str]
    files: Files = field(default_factory=dict)
    names: str = ""  # what the one error line must name
    left: tuple[str, ...] = ("rd", "md", "out.jsonl")  # must not exist afterwards
    code: int = 2


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _deep(depth: int = 50_000) -> str:
    return "[" * depth + "]" * depth + "\n"


def _run(case: Case, cwd: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
         *, quiet: bool = True) -> list[str]:
    """Creates the case's files, runs the command in-process, checks the exit code; returns the output lines
    (``quiet=False``: with the progress display on, as a user sees it)."""
    for name, content in case.files.items():
        path = cwd / name
        path.parent.mkdir(parents=True, exist_ok=True)
        content(path) if callable(content) else path.write_text(content, encoding="utf-8")
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(sys, "argv", ["personagraph", *(["-q"] if quiet else []), *case.argv])
    with pytest.raises(SystemExit) as done:
        main()
    captured = capsys.readouterr()
    lines = [line for line in (captured.out + captured.err).splitlines() if line.strip()]
    assert done.value.code == case.code, lines
    assert not any("internal error" in line or "Traceback" in line for line in lines), lines
    return lines


def _check_refused(case: Case, cwd: Path, lines: list[str]) -> None:
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    assert case.names in lines[0], lines
    assert not [name for name in case.left if (cwd / name).exists()], f"left behind: {lines}"


# --- input files: size, special files, nesting, surrogates, empty and duplicate content ----------------
def _surrogate_benchmark(path: Path) -> None:
    path.write_text('{"Expected Action": ["What do you do \\ud800 today?"]}')


FILE_CASES = [
    Case("P14-deep-nesting", [*EVAL, "--personas", "p.jsonl"], {"p.jsonl": _deep()}, "p.jsonl"),
    Case("P28-dev-zero", [*EVAL, "--personas", "/dev/zero"], names="/dev/zero"),
    Case("B16-dup-after-normalising", [*EVAL, "--benchmark", "b"],
         {"b/A farmer.json": '{"Expected Action": ["Q1?"]}', "b/A  farmer.json": '{"Expected Action": ["Q2?"]}'},
         "farmer"),
    Case("B17-empty-question-lists", [*EVAL, "--benchmark", "b"], {"b/A farmer.json": '{"Expected Action": []}'},
         "A farmer.json"),
    Case("B18-lone-surrogate-question", [*EVAL, "--benchmark", "b"], {"b/A farmer.json": _surrogate_benchmark},
         "A farmer.json"),
    Case("B19-deep-nesting", [*EVAL, "--benchmark", "b"], {"b/A farmer.json": _deep()}, "A farmer.json"),
    Case("M18-lone-surrogate-response", ["meta-eval", "-j", "test:judge", "--run-dir", "rd", "--resamples", "100",
                                         "--items", "i.jsonl"],
         {"i.jsonl": '{"persona": "A nurse", "question": "Q?", "response": "\\ud800", "human_score": 3}\n'}, "i.jsonl"),
    Case("S08-lone-surrogate", ["score", "--metrics", "dist", "--output", "out.jsonl", "--input", "in.jsonl"],
         {"in.jsonl": '{"response": "fine \\ud800"}\n'}, "in.jsonl"),
    Case("S09-output-is-dir", ["score", "--metrics", "dist", "-o", "odir", "-i", "in.jsonl"],
         {"in.jsonl": '{"response": "fine words here"}\n', "odir/keep": "x"}, "odir"),
    Case("S10-deep-nesting", ["score", "--metrics", "dist", "--output", "out.jsonl", "--input", "in.jsonl"],
         {"in.jsonl": _deep()}, "in.jsonl"),
]


@pytest.mark.parametrize("case", FILE_CASES, ids=lambda c: c.id)
def test_bad_input_files(case: Case, tmp_path: Path, capsys, monkeypatch) -> None:
    _check_refused(case, tmp_path, _run(case, tmp_path, capsys, monkeypatch))


FIFO_CASES = [
    Case("P25-fifo-no-writer", [*EVAL, "--personas", "fifo.txt"], {"fifo.txt": _fifo}, "fifo.txt"),
    Case("B14-fifo-json", [*EVAL, "--benchmark", "b"], {"b/A farmer.json": _fifo}, "A farmer.json"),
]


@pytest.mark.parametrize("case", FIFO_CASES, ids=lambda c: c.id)
def test_special_files_are_refused_without_hanging(case: Case, tmp_path: Path) -> None:
    for name, make in case.files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        make(tmp_path / name)  # type: ignore[operator]
    done = subprocess.run([sys.executable, "-m", "personagraph.cli", "-q", *case.argv], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    _check_refused(case, tmp_path, [line for line in done.stderr.splitlines() if line.strip()])


# --- memory files: checked whole before a bank exists ------------------------------------------------
IMPORT = ["memory", "import", "--user", "bart", "--memory-dir", "md", "m.jsonl"]
MEMORY_CASES = [
    Case("Mem01-empty-file", IMPORT, {"m.jsonl": ""}, "m.jsonl"),
    Case("Mem02-missing-event", IMPORT, {"m.jsonl": '{"id": "1"}\n'}, "m.jsonl:1: event"),
    Case("Mem03-blank-event", IMPORT, {"m.jsonl": '{"id": "1", "event": "  "}\n'}, "m.jsonl:1: event"),
    Case("Mem04-madial-no-user", ["memory", "import", "--memory-dir", "md", "m.jsonl"],
         {"m.jsonl": '{"1": {"time": "t", "scene": "s", "emotion": "e", "event": "went out"}}\n'}, "m.jsonl:1"),
    Case("Mem05-duplicate-id", IMPORT, {"m.jsonl": '{"id": "1", "event": "a"}\n{"id": "1", "event": "b"}\n'},
         "m.jsonl:2"),
    Case("Mem06-invalid-json", IMPORT, {"m.jsonl": "{id: 1}\n"}, "m.jsonl:1: invalid JSON"),
    Case("Mem07-event-number", IMPORT, {"m.jsonl": '{"id": "1", "event": 5}\n'}, "m.jsonl:1: event"),
    Case("Mem08-metadata-list", IMPORT, {"m.jsonl": '{"id": "1", "event": "a", "metadata": [1]}\n'},
         "m.jsonl:1: metadata"),
    Case("Mem10-lone-surrogate", IMPORT, {"m.jsonl": '{"id": "1", "event": "\\udc80 beach"}\n'}, "m.jsonl:1"),
    Case("Mem12-id-object", IMPORT, {"m.jsonl": '{"id": {"a": 1}, "event": "a"}\n'}, "m.jsonl:1: id"),
]


@pytest.mark.parametrize("case", MEMORY_CASES, ids=lambda c: c.id)
def test_bad_memory_files_leave_no_bank(case: Case, tmp_path: Path, capsys, monkeypatch) -> None:
    _check_refused(case, tmp_path, _run(case, tmp_path, capsys, monkeypatch))


# --- transcripts: header ids become file names, fields are typed --------------------------------------
def _transcript(header: dict, index: object = 1) -> str:
    turns = [{"type": "turn", "index": index, "role": "user", "text": "Howdy"},
             {"type": "turn", "index": index, "role": "assistant", "text": "Well, hello there."}]
    return "\n".join(json.dumps(line) for line in [{"type": "header", **header}, *turns]) + "\n"


JUDGE = ["judge-session", "-j", "test:judge", "--run-dir", "rd", "t.jsonl"]
TRANSCRIPT_CASES = [
    Case("J05-index-not-int", JUDGE, {"t.jsonl": _transcript({"persona": "A cowboy"}, "abc")}, "t.jsonl:2: index"),
    Case("J06-persona-list", JUDGE, {"t.jsonl": _transcript({"persona": ["A", "cowboy"]})}, "t.jsonl:1: persona"),
    Case("J07-id-path-traversal", JUDGE, {"t.jsonl": _transcript({"id": "../../../ESCAPED-J07", "persona": "A cowboy"})},
         "t.jsonl:1: id", ("rd", "../ESCAPED-J07.md", "../../ESCAPED-J07.md", "../../../ESCAPED-J07.md")),
    Case("J10-index-null", JUDGE, {"t.jsonl": _transcript({"persona": "A cowboy"}, None)}, "t.jsonl:2: index"),
    Case("J11-absolute-id", JUDGE, {"t.jsonl": _transcript({"id": "/tmp/ABSOLUTE-ESCAPE", "persona": "A cowboy"})},
         "t.jsonl:1: id", ("rd", "/tmp/ABSOLUTE-ESCAPE.md", "/tmp/ABSOLUTE-ESCAPE.jsonl")),
    Case("J12-persona-too-long", JUDGE, {"t.jsonl": _transcript({"persona": "cowboy " * 1000})}, "t.jsonl:1: persona"),
]


@pytest.mark.parametrize("case", TRANSCRIPT_CASES, ids=lambda c: c.id)
def test_bad_transcripts_are_refused_and_write_nothing(case: Case, tmp_path: Path, capsys, monkeypatch) -> None:
    _check_refused(case, tmp_path, _run(case, tmp_path, capsys, monkeypatch))


# --- option values: one line naming the flag (not click's usage box), nothing created -----------------
SIMULATE = ["simulate", "-p", "A nurse", "-m", "test:a", "--user-model", "test:u", "-j", "test:j", "--run-dir", "rd"]
NURSE_EVAL = ["eval", "-m", "test:agent", "-j", "test:judge", "--persona", "A nurse", "--run-dir", "rd"]
OPTION_CASES = [
    Case("O01-concurrency-negative", [*NURSE_EVAL, "--concurrency", "-1"], names="--concurrency"),
    Case("O02-concurrency-zero", [*NURSE_EVAL, "--concurrency", "0"], names="--concurrency"),
    Case("O03-turns-zero", [*SIMULATE, "--turns", "0"], names="--turns"),
    Case("O08-environments-zero", [*NURSE_EVAL, "--environments", "0"], names="--environments"),
    Case("O18-checkpoint-url-mysql", [*SIMULATE, "--checkpoint-url", "mysql://u:pw@h/db"], names="--checkpoint-url"),
    Case("O22-sessions-zero", [*SIMULATE, "--sessions", "0"], names="--sessions"),
    Case("O23-seed-not-int", [*NURSE_EVAL, "--seed", "abc"], names="--seed"),
    Case("O24-resamples-5", ["meta-eval", "-j", "test:judge", "--run-dir", "rd", "--items", "i.jsonl",
                             "--resamples", "5"], {"i.jsonl": "{}\n"}, "--resamples"),
    Case("O25-base-url-garbage", ["eval", "-m", "openai:fake", "-j", "test:j", "--persona", "A nurse",
                                  "--questions-per-task", "1", "--environments", "1", "--run-dir", "rd",
                                  "--base-url", "not a url"], names="--base-url"),
]


@pytest.mark.parametrize("case", OPTION_CASES, ids=lambda c: c.id)
def test_bad_option_values_are_one_line(case: Case, tmp_path: Path, capsys, monkeypatch) -> None:
    lines = _run(case, tmp_path, capsys, monkeypatch, quiet=False)  # no progress bars left above the line
    _check_refused(case, tmp_path, lines)
    assert "pw" not in lines[0]


# --- brackets in ids, names and memory text: valid input, printed as typed ----------------------------
def test_brackets_are_text_not_markup(tmp_path: Path, capsys, monkeypatch) -> None:
    memory = '{"id": "1", "event": "went to the [/] beach [bold]x[/bold]"}\n'
    lines = _run(Case("K02-memory-import-file-brackets", ["memory", "import", "--user", "bart", "--memory-dir", "md",
                                                         "m[/].jsonl"], {"m[/].jsonl": memory}, code=0),
                 tmp_path, capsys, monkeypatch)
    assert lines == ["imported 1 memories from m[/].jsonl"]
    lines = _run(Case("K03-memory-search-event-brackets", ["memory", "search", "--user", "bart", "--memory-dir", "md",
                                                          "--method", "bm25", "beach"], code=0),
                 tmp_path, capsys, monkeypatch)
    assert any("went to the [/] beach [bold]x[/bold]" in line for line in lines), lines
    lines = _run(Case("K06-memory-user-brackets", ["memory", "delete", "--user", "u[/]", "--all", "--memory-dir", "md"],
                      code=0), tmp_path, capsys, monkeypatch)
    assert lines == ["deleted 0 memories of user u[/]"]
    csv = 'personas,context,act_response\n"i am a nurse.",User1: hi?,Hello.\n'
    lines = _run(Case("K05-persobench-model-brackets", ["persobench", "--data", "d.csv", "-m", "test:x[/]",
                                                       "--metrics", "dist", "--run-dir", "pb"], {"d.csv": csv}, code=0),
                 tmp_path, capsys, monkeypatch)
    assert any("test:x[/]" in line for line in lines), lines


def test_chat_with_brackets_in_the_persona(tmp_path: Path) -> None:  # K01: reads a real stdin
    done = subprocess.run([sys.executable, "-m", "personagraph.cli", "chat", "-p", "A gamer who types [/] a lot",
                           "-m", "test:a", "--run-dir", "rd"], cwd=tmp_path, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert "Chatting with test:a as: A gamer who types [/] a lot" in done.stdout


# --- run stores edited by hand: one line naming the store, the record and the field ---------------------
EVAL_RUN = ["eval", "-m", "test:agent", "-j", "test:judge", "--generator", "test:gen", "--persona", "A cowboy",
            "--environments", "1", "--questions-per-task", "1", "--run-dir", "r"]
SIMULATE_RUN = ["simulate", "-p", "A nurse", "-m", "test:a", "--user-model", "test:u", "-j", "test:j", "--turns", "2",
                "--run-dir", "r"]
META_EVAL_RUN = ["meta-eval", "-j", "test:judge", "--resamples", "100", "--items", "i.jsonl", "--run-dir", "r"]
PERSOBENCH_RUN = ["persobench", "--data", "d.csv", "-m", "test:x", "--metrics", "dist", "--run-dir", "r"]
JUDGE_CHECK_RUN = ["judge-check", "--items", "i.jsonl", "--judge", "test:judge", "--generator", "test:gen",
                   "--resamples", "100", "--run-dir", "r"]
BEHAVIOR_RUN = ["behavior-alignment", "--dialogues", "d.tsv", "--labeller", "test:default",
                "--system", "test:default", "--resamples", "100", "--run-dir", "r"]
RUN_INPUTS = {
    "i.jsonl": "".join(json.dumps({"id": str(i), "criterion": "Persona Consistency", "persona": p, "question": "Q?",
                                   "response": r, "human": h}) + "\n"
                       for i, (p, r, h) in enumerate([("A nurse", "Sure thing", 3), ("A chef", "I cook", 4)])),
    "d.csv": 'personas,context,act_response\n"i am a nurse.",User1: hi?,Hello.\n"I am a chef.",What now?,I cook.\n',
    "d.tsv": "".join("\t".join(row) + "\n" for row in [
        ("dialog_id", "speaker", "text", "expert_label"),
        ("d1", "RECOMMENDER", "Hello, how are you?", "no_strategy"), ("d1", "SEEKER", "I want a comedy", ""),
        ("d1", "RECOMMENDER", "Which did you like?", "opinion_inquiry"), ("d1", "SEEKER", "Superheroes.", ""),
        ("d1", "RECOMMENDER", "Me too, I love Marvel!", "similarity")]),
}


@pytest.fixture(scope="module")
def finished_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Finished runs of six kinds (test models), each in a folder with its inputs; a case copies one. The
    six processes run at once: one after another they took ~38 s, most of it each one's imports."""
    started = {}
    for name, argv in (("eval", EVAL_RUN), ("simulate", SIMULATE_RUN), ("meta-eval", META_EVAL_RUN),
                       ("persobench", PERSOBENCH_RUN), ("judge-check", JUDGE_CHECK_RUN),
                       ("behavior", BEHAVIOR_RUN)):
        cwd = tmp_path_factory.mktemp(name)
        for file, text in RUN_INPUTS.items():
            (cwd / file).write_text(text)
        process = subprocess.Popen([sys.executable, "-m", "personagraph.cli", "-q", *argv], cwd=cwd,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        started[name] = (cwd, process)
    try:
        for name, (_, process) in started.items():
            _, stderr = process.communicate(timeout=300)
            assert process.returncode == 0, f"{name}: {stderr}"
    finally:
        for _, process in started.values():  # after a failure, none is left running
            if process.poll() is None:
                process.kill()
                process.wait()
    return {name: cwd for name, (cwd, _) in started.items()}


def _tamper(run_dir: Path, sql: str) -> None:
    db = sqlite3.connect(run_dir / "run.sqlite")
    db.execute(sql)
    db.commit()
    db.close()


def _rows(run_dir: Path) -> list[tuple]:
    db = sqlite3.connect(f"file:{run_dir / 'run.sqlite'}?mode=ro", uri=True)
    try:
        return sorted(db.execute("SELECT 'r', kind, id, data FROM records UNION ALL SELECT 'm', key, '', value FROM meta"
                                 " UNION ALL SELECT 'c', key, '', text FROM calls"))
    finally:
        db.close()


@dataclass
class Damage:
    id: str
    run: str  # which finished run is damaged: eval or simulate
    sql: str  # the damage, done to r/run.sqlite
    argv: list[str]  # the command that meets it: a report or the same command again (a resume)
    names: str  # what the one error line names besides run.sqlite: the row and its field


REPORT = ["report", "-o", "out.html", "r"]
_FIRST = "rowid=(SELECT min(rowid) FROM records WHERE kind='{kind}')"  # one row of a kind
DAMAGE_CASES = [
    Damage("R09-question-without-id", "eval",
           "UPDATE records SET data=json_remove(data, '$.id') "
           f"WHERE {_FIRST.format(kind='question')}", REPORT,
           "record question"),
    Damage("R10-session-missing-fields", "simulate",
           "UPDATE records SET data=json_remove(data, '$.turns', '$.session_verdict') WHERE kind='session'", REPORT,
           "(turns: Field required)"),
    Damage("R09-resume-question-without-id", "eval",
           "UPDATE records SET data=json_remove(data, '$.id') "
           f"WHERE {_FIRST.format(kind='question')}", EVAL_RUN,
           "(id: Field required)"),
    Damage("resume-verdict-score-text", "eval",
           "UPDATE records SET data=json_set(data, '$.score', 'abc') "
           f"WHERE {_FIRST.format(kind='verdict')}", EVAL_RUN,
           "record verdict"),
    Damage("resume-answer-not-an-object", "eval", f"UPDATE records SET data='[1]' WHERE {_FIRST.format(kind='answer')}",
           EVAL_RUN, "(expected a JSON object, got list)"),
    Damage("resume-selection-wrong-shape", "eval", "UPDATE records SET data=json_set(data, '$.environments', 5) "
           "WHERE kind='selection'", EVAL_RUN, "(environments: Input should be a valid list)"),
    Damage("R19-resume-data-files-wrong-shape", "eval", "UPDATE meta SET value='[1]' WHERE key='data_files'",
           EVAL_RUN, "meta 'data_files'"),
    Damage("R10-resume-session-turn-role", "simulate",
           "UPDATE records SET data=json_set(data, '$.turns[0].role', 'bot') WHERE kind='session'", SIMULATE_RUN,
           "(turns.0.role: Input should be 'user' or 'assistant')"),
    Damage("resume-turn-index-text", "simulate",
           "UPDATE records SET data=json_set(data, '$.index', 'one') "
           f"WHERE {_FIRST.format(kind='turn')}", SIMULATE_RUN,
           "record turn"),
    Damage("resume-meta-verdict-score-text", "meta-eval", "UPDATE records SET data=json_set(data, '$.score', 'x') "
           f"WHERE {_FIRST.format(kind='meta_verdict')}", META_EVAL_RUN, "record meta_verdict"),
    Damage("resume-meta-item-without-id", "meta-eval", "UPDATE records SET data=json_remove(data, '$.id') "
           f"WHERE {_FIRST.format(kind='meta_item')}", META_EVAL_RUN, "(id: Field required)"),
    Damage("resume-generation-without-id", "persobench", "UPDATE records SET data=json_remove(data, '$.id') "
           f"WHERE {_FIRST.format(kind='persobench.generation')}", PERSOBENCH_RUN, "record persobench.generation"),
    Damage("resume-session-retry-attempts-text", "simulate",
           "INSERT INTO records(kind, id, unit, data, created) "
           """VALUES ('session_retry', 's1', 's1', '{"attempts": "two"}', 0)""", SIMULATE_RUN,
           "record session_retry 's1' is damaged (attempts: Input should be a valid integer"),
    Damage("resume-check-item-without-response", "judge-check",
           "UPDATE records SET data=json_remove(data, '$.response') "
           f"WHERE {_FIRST.format(kind='check_item')}",
           JUDGE_CHECK_RUN, "record check_item"),
    Damage("resume-check-variant-kind-unknown", "judge-check",
           "UPDATE records SET data=json_set(data, '$.kind', 'x') "
           f"WHERE {_FIRST.format(kind='check_variant')}",
           JUDGE_CHECK_RUN, "(kind: Input should be"),
    Damage("report-check-verdict-not-an-object", "judge-check",
           f"UPDATE records SET data='\"7\"' WHERE {_FIRST.format(kind='check_verdict')}", REPORT,
           "record check_verdict"),
    Damage("resume-behavior-label-missing", "behavior",
           "UPDATE records SET data=json_remove(data, '$.label') "
           f"WHERE {_FIRST.format(kind='behavior.label')}",
           BEHAVIOR_RUN, "(label: Field required)"),
    Damage("resume-behavior-response-text-number", "behavior",
           "UPDATE records SET data=json_set(data, '$.text', 5) "
           f"WHERE {_FIRST.format(kind='behavior.response')}",
           BEHAVIOR_RUN, "record behavior.response"),
    Damage("report-behavior-system-turn-text", "behavior",
           "UPDATE records SET data=json_set(data, '$.turn', 'two') "
           f"WHERE {_FIRST.format(kind='behavior.system')}",
           REPORT, "(turn: Input should be a valid integer"),
]


@pytest.mark.parametrize("case", DAMAGE_CASES, ids=lambda c: c.id)
def test_a_damaged_run_store_is_one_line_and_keeps_its_good_rows(
    case: Damage, finished_runs: dict[str, Path], tmp_path: Path, capsys, monkeypatch
) -> None:
    """The error names run.sqlite, the row and its field, leaves the store as it was (no report written), and
    the deletion it suggests removes that one row only, after which the command runs."""
    shutil.copytree(finished_runs[case.run], tmp_path, dirs_exist_ok=True)
    _tamper(tmp_path / "r", case.sql)
    before = _rows(tmp_path / "r")
    lines = _run(Case(case.id, case.argv), tmp_path, capsys, monkeypatch)
    _check_refused(Case(case.id, case.argv, names=case.names, left=("out.html",)), tmp_path, lines)
    assert "r/run.sqlite: " in lines[0], lines
    assert _rows(tmp_path / "r") == before  # refused before anything was written
    delete = re.search(r'sqlite3 r/run.sqlite "([^"]+)"', lines[0])
    assert delete, lines
    _tamper(tmp_path / "r", delete.group(1))
    assert len(_rows(tmp_path / "r")) == len(before) - 1
    monkeypatch.setattr(sys, "argv", ["personagraph", "-q", *case.argv])
    with pytest.raises(SystemExit) as again:
        main()
    assert again.value.code in (0, EXIT_INCOMPLETE), capsys.readouterr()


BESIDE_CASES = [  # (case id, run, file in r/ made unreadable, SQL first, command): the file is named, then deleted
    ("resume-eval-checkpoints-garbage", "eval", "checkpoints.sqlite", "DELETE FROM records WHERE kind='unit_done'",
     EVAL_RUN),
    ("resume-simulate-checkpoints-garbage", "simulate", "checkpoints.sqlite", "", SIMULATE_RUN),
    ("resume-simulate-transcripts-a-file", "simulate", "transcripts", "DELETE FROM records WHERE kind='session'",
     SIMULATE_RUN),
]


@pytest.mark.parametrize("case", BESIDE_CASES, ids=lambda c: c[0])
def test_a_damaged_file_beside_the_store_is_one_line_and_its_advice_works(
    case: tuple[str, str, str, str, list[str]], finished_runs: dict[str, Path], tmp_path: Path, capsys, monkeypatch
) -> None:
    """A checkpoint store that is not SQLite, a transcripts folder that is a file: one line naming it, every
    record and call of run.sqlite kept; once the file is deleted, the same command finishes from the cache
    (0 new LLM calls)."""
    case_id, run, name, sql, argv = case
    shutil.copytree(finished_runs[run], tmp_path, dirs_exist_ok=True)
    if sql:
        _tamper(tmp_path / "r", sql)
    damaged = tmp_path / "r" / name
    shutil.rmtree(damaged) if damaged.is_dir() else damaged.unlink()
    damaged.write_text("not what belongs here")
    before = {row for row in _rows(tmp_path / "r") if row[0] != "m"}
    lines = _run(Case(case_id, argv), tmp_path, capsys, monkeypatch)
    _check_refused(Case(case_id, argv, names=f"r/{name}: ", left=()), tmp_path, lines)
    assert set(before) <= {row for row in _rows(tmp_path / "r") if row[0] != "m"}  # every record and call kept
    damaged.unlink()
    monkeypatch.setattr(sys, "argv", ["personagraph", *argv])
    with pytest.raises(SystemExit) as again:
        main()
    out = capsys.readouterr().out
    assert again.value.code == 0 and "LLM calls this run: 0 " in out, out


DAMAGED_CONFIGS = [  # R19 and the shapes the 2026-12-03 re-run found crashing the report
    '{"models": 5, "judges": 3}', '{"personas": 5}',
    '{"personas": [5, "x", {"description": 7}, {"description": ""}]}', '{"models": [1, 2]}',
    '{"judges": [null, 3]}', '[1, 2]',
]


@pytest.mark.parametrize("config", DAMAGED_CONFIGS)
def test_a_report_and_view_show_what_parses_of_a_damaged_config(
        finished_runs: dict[str, Path], tmp_path: Path, capsys, monkeypatch, config: str) -> None:
    """R19: a config of the wrong shape does not stop a report or a view; the records still name the model."""
    shutil.copytree(finished_runs["eval"], tmp_path, dirs_exist_ok=True)
    _tamper(tmp_path / "r", f"UPDATE meta SET value='{config}' WHERE key='config'")
    _run(Case("R19-config-wrong-shape", REPORT, code=0), tmp_path, capsys, monkeypatch)
    assert "test:agent" in (tmp_path / "out.html").read_text()
    _run(Case("R19-config-wrong-shape-view", ["view", "r"], code=0), tmp_path, capsys, monkeypatch)


# --- output files: a mistyped -o never overwrites a run store, never blocks on a FIFO ------------------
OUTPUT_CASES = [
    Case("report-o-run-store", ["report", "-o", "r/run.sqlite", "r"], names="-o r/run.sqlite: a SQLite database"),
    Case("report-o-fifo", ["report", "-o", "ff", "r"], {"ff": _fifo}, "-o ff: not a regular file (a FIFO)"),
    Case("view-o-run-store", ["view", "r", "-f", "csv", "-o", "r/run.sqlite"], names="-o r/run.sqlite"),
    Case("compare-o-fifo", ["compare", "r", "r", "-f", "json", "-o", "ff"], {"ff": _fifo}, "-o ff"),
    Case("score-o-run-store", ["score", "--metrics", "dist", "-o", "r/run.sqlite", "-i", "in.jsonl"],
         {"in.jsonl": '{"response": "fine words here"}\n'}, "r/run.sqlite: a SQLite database"),
]


@pytest.mark.parametrize("case", OUTPUT_CASES, ids=lambda c: c.id)
def test_bad_output_files_are_refused_and_overwrite_nothing(case: Case, finished_runs: dict[str, Path],
                                                            tmp_path: Path) -> None:
    shutil.copytree(finished_runs["eval"], tmp_path, dirs_exist_ok=True)
    for name, make in case.files.items():
        make(tmp_path / name) if callable(make) else (tmp_path / name).write_text(make)
    store = (tmp_path / "r" / "run.sqlite").read_bytes()
    done = subprocess.run([sys.executable, "-m", "personagraph.cli", "-q", *case.argv], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    _check_refused(case, tmp_path, [line for line in (done.stdout + done.stderr).splitlines() if line.strip()])
    assert (tmp_path / "r" / "run.sqlite").read_bytes() == store
    assert not list(tmp_path.glob("**/.*.partial"))
