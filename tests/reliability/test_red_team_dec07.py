"""The fourth red-team pass (findings 2026-12-07, R-2 … R-10): one test per finding. Offline: ``test:*``
models and plug-in agents defined here; the concurrency cases run real second processes."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from _cli import cli, one_line_error, small_bank, tree

from personagraph.errors import PersonagraphError

FAST = ["--environments", "1", "--questions-per-task", "1"]
PERSONA = "A retired cowboy from Texas"
EVAL = ["eval", "--persona", PERSONA, "-m", "test:agent", "-j", "test:j1", "--generator", "test:gen", *FAST]
CLI = [sys.executable, "-m", "personagraph.cli"]


# --- a start refused by the run lock removes nothing; the holder goes on writing ---------------------
_HOLDER = """
import sys
from personagraph.store import RunStore
store = RunStore(sys.argv[1])
print("locked", flush=True)
sys.stdin.readline()
try:
    store.put("note", "after", {"text": "written after the other start was refused"})
    store.close()
    print("wrote", flush=True)
except Exception as exc:
    print(f"failed: {exc}", flush=True)
"""


def test_r2_a_start_refused_by_the_lock_removes_nothing_of_the_holder(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The other process takes the new run directory just after this one looked at it, before this one
    reaches the lock: this one is refused in one line and leaves every file of the holder in place."""
    from personagraph.runs import base

    run_dir = tmp_path / "new"
    holder: list[subprocess.Popen[str]] = []
    real = base.RunStore

    def taken_meanwhile(*args: object, **kwargs: object) -> object:
        child = subprocess.Popen([sys.executable, "-c", _HOLDER, str(run_dir)], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True)
        holder.append(child)
        assert child.stdout.readline().strip() == "locked"
        return real(*args, **kwargs)

    monkeypatch.setattr(base, "RunStore", taken_meanwhile)
    code, output = cli(*EVAL, "--run-dir", str(run_dir))
    [child] = holder
    try:
        assert code == 2 and f"in use by process {child.pid}" in one_line_error(output)
        assert {"run.sqlite", "run.lock"} <= set(os.listdir(run_dir))
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "wrote"
    finally:
        child.stdin.close()
        child.wait(30)
    from personagraph.store import RunStore

    assert RunStore(run_dir, readonly=True).get("note", "after") is not None


def test_r2_two_evals_started_together_on_a_new_run_dir(tmp_path: Path) -> None:
    """Two real processes on one new run directory: each ends rc 0 or with the one-line "in use" error (rc 2);
    the run directory and its finished run are there at the end, never a "disk I/O error"."""
    for attempt in range(2):
        run_dir = tmp_path / f"two{attempt}"
        args = [*CLI, "-q", *EVAL, "--run-dir", str(run_dir)]
        first = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        second = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        results = [(p.wait(120), p.stdout.read()) for p in (first, second)]
        for code, output in results:
            assert code in (0, 2), output
            if code == 2:
                assert "in use by process" in one_line_error(output)
        assert 0 in [code for code, _ in results]
        assert json.loads((run_dir / "summary.json").read_text())["kind"] == "eval"


# --- both stores are checked before either is written --------------------------------------------------
def test_r9_a_damaged_checkpoint_store_is_refused_before_the_run_store_is_written(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    assert cli(*EVAL, "--run-dir", str(run_dir))[0] == 0
    with (run_dir / "checkpoints.sqlite").open("r+b") as file:
        file.write(b"SQLite format 2\0")  # a damaged magic
    before = tree(run_dir)
    code, output = cli(*EVAL, "--run-dir", str(run_dir))
    assert code == 2 and "the checkpoint store is unreadable" in one_line_error(output)
    assert tree(run_dir) == before  # neither store written, no -wal or -shm left beside them


# --- the memory bank ----------------------------------------------------------------
def _memories(path: Path, n: int, text: str) -> Path:
    path.write_text("".join(json.dumps({"id": str(i), "event": f"{text} {i}"}) + "\n" for i in range(n)))
    return path


def test_r3_two_imports_of_one_user_at_once_end_as_two_in_a_row(tmp_path: Path) -> None:
    bank = tmp_path / "bank"
    files = [_memories(tmp_path / "a.jsonl", 300, "a beach trip"), _memories(tmp_path / "b.jsonl", 300, "a hike")]
    runs = [subprocess.Popen([*CLI, "-q", "memory", "import", "--user", "ua", str(f), "--memory-dir", str(bank)],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for f in files]
    results = [(p.wait(300), p.stdout.read()) for p in runs]
    assert sorted(code for code, _ in results) == [0, 2], results
    [refused] = [output for code, output in results if code == 2]
    assert "memory 0 of user ua already exists" in one_line_error(refused)
    winner = next(f for f, (code, _) in zip(files, results, strict=True) if code == 0)
    code, _ = cli("memory", "export", str(tmp_path / "out.jsonl"), "--user", "ua", "--memory-dir", str(bank))
    exported = [json.loads(line)["event"] for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert code == 0 and sorted(exported) == sorted(json.loads(line)["event"]
                                                   for line in winner.read_text().splitlines())


@pytest.fixture(scope="module")
def two_user_bank(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return small_bank(tmp_path_factory.mktemp("banks") / "bank")


def _damaged(folder: Path, damage: str) -> None:
    store = folder / "chroma.sqlite3"
    if damage == "emptied":
        store.write_bytes(b"")
    elif damage == "removed":
        store.unlink()
    else:  # 4 KB of random bytes in the middle of the file
        data = bytearray(store.read_bytes())
        middle = (len(data) // 2) // 4096 * 4096
        data[middle:middle + 4096] = random.Random(7).randbytes(4096)
        store.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", ["emptied", "removed", "random-page"])
@pytest.mark.parametrize("command", [
    ["memory", "search", "beach trip", "--user", "bob"],
    ["memory", "export", "OUT", "--user", "bob"],
    ["memory", "import", "IN", "--user", "bob2"],
    ["memory", "add", "--user", "bob2", "--event", "a walk"],
], ids=["search", "export", "import", "add"])
def test_r4_an_emptied_or_damaged_bank_is_refused_and_left_untouched(tmp_path: Path, two_user_bank: Path,
                                                                      damage: str, command: list[str]) -> None:
    import shutil

    from personagraph.store import sqlite_damage

    folder = tmp_path / "bank"
    shutil.copytree(two_user_bank, folder)
    _damaged(folder, damage)
    if damage == "random-page":
        assert sqlite_damage(folder / "chroma.sqlite3") is not None  # the damage is one SQLite finds
    before = tree(folder)
    inputs = {"OUT": str(tmp_path / "out.jsonl"), "IN": str(_memories(tmp_path / "in.jsonl", 1, "a walk"))}
    code, output = cli(*[inputs.get(arg, arg) for arg in command], "--memory-dir", str(folder))
    line = one_line_error(output)
    assert code == 2 and f"memory bank at {folder}" in line and "chroma.sqlite3" in line
    assert tree(folder) == before and not (tmp_path / "out.jsonl").exists()


def test_r8_an_interrupted_import_says_how_many_memories_it_wrote(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A large import is written in committed batches; stopped after the first, it says so, and the bank
    holds exactly those."""
    from personagraph.memory import bank as bank_module

    monkeypatch.setattr(bank_module, "SAVE_BATCH", 3)
    real = bank_module.MemoryBank._write
    calls = []

    def stopped_after_one_batch(self: object, *args: object, **kwargs: object) -> None:
        if calls:
            raise KeyboardInterrupt
        calls.append(1)
        real(self, *args, **kwargs)

    monkeypatch.setattr(bank_module.MemoryBank, "_write", stopped_after_one_batch)
    source = _memories(tmp_path / "m.jsonl", 7, "a beach trip")
    code, output = cli("memory", "import", str(source), "--user", "u", "--memory-dir", str(tmp_path / "bank"))
    assert code == 130
    assert output.strip() == (f"interrupted: 3 of 7 memories of {source} were imported; run the same command "
                              "with --replace to import them all")
    monkeypatch.setattr(bank_module.MemoryBank, "_write", real)
    assert bank_module.MemoryBank(tmp_path / "bank").count("u") == 3


@pytest.mark.parametrize("command", [
    ["memory", "import", "IN", "--user", ""],
    ["memory", "search", "beach", "--user", ""],
    ["memory", "search", "beach", "--user", "  "],
    ["memory", "add", "--user", "", "--event", "x"],
    ["memory", "delete", "--user", "", "--all"],
], ids=["import", "search", "search-blank", "add", "delete"])
def test_r10_an_empty_user_is_the_flags_own_error(tmp_path: Path, command: list[str]) -> None:
    source = _memories(tmp_path / "m.jsonl", 1, "a walk")
    args = [str(source) if arg == "IN" else arg for arg in command]
    code, output = cli(*args, "--memory-dir", str(tmp_path / "bank"))
    assert code == 2 and one_line_error(output).startswith("error: --user ")
    assert not (tmp_path / "bank").exists()


# --- a static benchmark that lacks tasks has no complete PersonaScore ----------------------------------
def test_r7_a_benchmark_without_every_task_has_an_incomplete_persona_score(tmp_path: Path) -> None:
    bench = tmp_path / "bench"
    bench.mkdir()
    (bench / f"{PERSONA}.json").write_text(json.dumps({
        "Linguistic Habits": ["How do you greet a stranger?"],
        "Persona Consistency": ["What did you do for a living?"],
    }))
    code, _ = cli("eval", "--benchmark", str(bench), "-m", "test:agent", "-j", "test:j1",
                  "--run-dir", str(tmp_path / "run"))
    scores = json.loads((tmp_path / "run" / "summary.json").read_text())["models"]["test:agent"]
    assert code == 0 and scores["persona_score"] is None and scores["incomplete"] is True
    assert scores["tasks_missing"] == ["Expected Action", "Action Justification", "Toxicity Control"]
    assert scores["tasks_scored"] == 2


# --- smaller items ------------------------------------------------------------------------------------
@pytest.mark.parametrize("field", ["pass_threshold", "persona_temperature"])
def test_r10_nan_in_a_config_is_refused_as_not_a_finite_number(field: str) -> None:
    from personagraph.runs.base import ConfigError, make_config
    from personagraph.runs.eval import EvalConfig

    with pytest.raises(ConfigError, match=f"^{field}: Input should be a finite number$"):
        make_config(EvalConfig, personas=[PERSONA], models=["test:agent"], **{field: float("nan")})


def test_r10_nan_in_model_settings_is_refused_as_not_a_finite_number() -> None:
    from pydantic import ValidationError

    from personagraph.models import ModelSettings

    with pytest.raises(ValidationError, match="finite number"):
        ModelSettings(timeout_s=float("nan"))


@pytest.mark.parametrize("persona,message", [
    (5, "'persona' must be text \\(its description\\), not int"),
    ("x" * 10_000_000, "'persona' is 10000000 characters; the limit is 4000"),
], ids=["int", "10M-characters"])
def test_r10_an_evaluator_names_what_is_wrong_with_the_persona(persona: object, message: str) -> None:
    from personagraph.evaluators import create_persona_judge

    judge = create_persona_judge(judge="test:j1")
    with pytest.raises(PersonagraphError, match=message):
        judge(inputs={"persona": persona, "question": "q"}, outputs="x")
