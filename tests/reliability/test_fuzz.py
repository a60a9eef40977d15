"""Bad inputs, fuzzed: persona files, option values, benchmark dirs, corrupted run stores.

Whatever the input, `personagraph eval` exits 0 or 2; on 2 it prints one line naming the file (or the
option) and what is wrong, never a traceback, and a run store it refused is byte-for-byte unchanged.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from personagraph.cli import app
from personagraph.models.settings import MAX_CONCURRENCY
from personagraph.environments.benchmark import load_benchmark
from personagraph.errors import PersonagraphError
from personagraph.runs.eval import EvalConfig
from personagraph.runs.eval import run as run_eval
from personagraph.personas import load_personas
from personagraph.schemas import Persona

FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
MODELS = ["--model", "test:agent", "--judge", "test:judge", "--generator", "test:gen", "--environments", "1",
          "--questions-per-task", "1"]


def invoke(args: list[str]) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["-q", *args])
    output = result.output  # stdout and stderr, interleaved
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"uncaught {type(result.exception).__name__}: {result.exception}\n{output}")
    assert "Traceback" not in output, output
    return result.exit_code, output


def assert_one_line_error(code: int, output: str, *names: str) -> None:
    assert code == 2, output
    lines = [line for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:")]
    assert len(errors) == 1 and len(lines) == 1, output
    assert any(name in errors[0] for name in names), output


# --- persona files ---------------------------------------------------------------------------------
SUFFIXES = st.sampled_from([".txt", ".jsonl", ".yaml", ".yml", ".json", ".csv", ""])


@FAST
@given(content=st.binary(max_size=3000), suffix=SUFFIXES)
def test_persona_loader_accepts_or_names_the_file(content: bytes, suffix: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"people{suffix}"
        path.write_bytes(content)
        try:
            personas = load_personas(path)
        except PersonagraphError as exc:
            assert str(path) in str(exc) and "\n" not in str(exc)
        else:
            assert personas and all(p.description.strip() for p in personas)


def _bad_persona_file(kind: str, noise: str) -> tuple[str, bytes]:
    return {
        "empty": (".txt", b""),
        "blank": (".txt", b"\n  \n# only a comment\n"),
        "binary": (".txt", b"\x00\x01" + noise.encode()),
        "latin1": (".txt", ("Andr\xe9 " + noise).encode("latin-1", "replace") + b"\xff\xfe"),
        "huge line": (".txt", b"x" * 5000 + noise.encode()),
        "bad yaml": (".yaml", b"personas: [unclosed, {" + noise.encode()),
        "yaml scalar": (".yaml", b"just a string"),
        "bad jsonl": (".jsonl", b'{"persona": "ok"}\n{not json ' + noise.encode()),
        "jsonl number": (".jsonl", b"42\n"),
        "unknown type": (".docx", b"persona"),
    }[kind]


@FAST
@given(kind=st.sampled_from(["empty", "blank", "binary", "latin1", "huge line", "bad yaml", "yaml scalar",
                             "bad jsonl", "jsonl number", "unknown type"]),
       noise=st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=50))
def test_bad_persona_files_exit_2_with_one_line(tmp_path: Path, kind: str, noise: str) -> None:
    suffix, content = _bad_persona_file(kind, noise)
    path = tmp_path / f"people{suffix}"
    path.write_bytes(content)
    code, output = invoke(["eval", "--personas", str(path), *MODELS, "--run-dir", str(tmp_path / "run")])
    assert_one_line_error(code, output, path.name)
    assert not (tmp_path / "run").exists()


# --- option values -----------------------------------------------------------------------------------
@FAST
@given(option=st.sampled_from(["--concurrency", "--environments", "--questions-per-task", "--seed"]),
       value=st.one_of(st.integers(max_value=0), st.integers(min_value=MAX_CONCURRENCY + 1),
                       st.text(max_size=8)))
def test_bad_option_values_exit_2_without_traceback(tmp_path: Path, option: str, value: object) -> None:
    if option == "--seed" and isinstance(value, int):
        return  # any integer is a valid seed
    if isinstance(value, str) and value.strip().lstrip("-").isdecimal():
        if option != "--concurrency" or 1 <= int(value) <= MAX_CONCURRENCY:
            return  # a number: the integer cases cover it (and " 1" is a valid concurrency)
    code, output = invoke(["eval", "--persona", "A cowboy", *MODELS, option, str(value),
                           "--run-dir", str(tmp_path / "run")])
    if option in ("--environments", "--questions-per-task") and isinstance(value, int) and value >= 2000:
        assert code == 2 and "Traceback" not in output  # caught by the run config's bounds
        return
    assert code == 2 and option in output, output


@pytest.mark.parametrize("args, name", [
    (["--executor", "spark"], "--executor"),
    (["--ray-address", "auto"], "--ray-address"),
    (["--model", "nonsense"], "nonsense"),
    (["--judge", "test:agent"], "test:agent"),
])
def test_bad_choices_are_one_line(tmp_path: Path, args: list[str], name: str) -> None:
    code, output = invoke(["eval", "--persona", "A cowboy", *MODELS, *args, "--run-dir", str(tmp_path / "run")])
    assert_one_line_error(code, output, name)


# --- benchmark dirs ------------------------------------------------------------------------------------
JSONISH = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                       lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=20), inner, max_size=4),
                       max_leaves=12)


@FAST
@given(files=st.lists(st.tuples(st.text(min_size=1, max_size=30).filter(lambda s: "/" not in s and "\x00" not in s),
                                st.one_of(JSONISH.map(lambda v: json.dumps(v).encode()), st.binary(max_size=200))),
                      min_size=1, max_size=3))
def test_benchmark_loader_accepts_or_names_the_file(files: list[tuple[str, bytes]]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        for name, content in files:
            try:
                (Path(folder) / f"{name}.json").write_bytes(content)
            except OSError:
                return  # a name the file system refuses
        try:
            loaded = load_benchmark(folder)
        except PersonagraphError as exc:
            assert folder in str(exc) and "\n" not in str(exc)
        else:
            assert all(questions for _, questions in loaded)


@FAST
@given(content=st.sampled_from([b"", b"{", b"[]", b'{"Expected Action": "not a list"}', b'{"Cooking": ["q?"]}',
                                b'{"Toxicity": [""]}', b"\xff\xfe{}", b"{}"]))
def test_bad_benchmark_files_exit_2_naming_the_file(tmp_path: Path, content: bytes) -> None:
    folder = tmp_path / "bench"
    folder.mkdir(exist_ok=True)
    path = folder / "A retired cowboy from Texas.json"
    path.write_bytes(content)
    code, output = invoke(["eval", "--benchmark", str(folder), *MODELS, "--run-dir", str(tmp_path / "run")])
    assert_one_line_error(code, output, path.name)


# --- corrupted run stores -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def finished_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("finished")
    config = EvalConfig(personas=[Persona(description="A cowboy")], models=["test:agent"], judges=["test:judge"],
                       generator="test:gen", environments=1, questions_per_task=1)
    asyncio.run(run_eval(config, run_dir))
    return run_dir / "run.sqlite"


def _corrupt(data: bytes, how: str, offset: int, noise: bytes) -> bytes:
    at = offset % len(data)
    if how == "truncate":
        return data[:at]
    if how == "overwrite":
        return data[:at] + noise + data[at + len(noise):]
    if how == "header":
        return noise[:16].ljust(16, b"\x00") + data[16:]
    if how == "zero page":
        page = (at // 4096) * 4096
        return data[:page] + b"\x00" * 4096 + data[page + 4096:]
    return data + noise  # "append"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@example(how="overwrite", offset=3279, noise=b"\x00\x00\x80")  # invalid UTF-8 inside a stored text
@example(how="overwrite", offset=32101, noise=b"\x00\x00\x00")  # an index entry no longer its row's
@example(how="overwrite", offset=18, noise=b"\x03")  # a header's write version SQLite opens read-only
@given(how=st.sampled_from(["truncate", "overwrite", "header", "zero page", "append"]),
       offset=st.integers(min_value=0, max_value=1 << 20), noise=st.binary(min_size=1, max_size=64))
def test_corrupted_store_is_refused_untouched_or_used_safely(finished_store: Path, how: str, offset: int,
                                                             noise: bytes) -> None:
    damaged = _corrupt(finished_store.read_bytes(), how, offset, noise)
    with tempfile.TemporaryDirectory() as folder:
        run_dir = Path(folder) / "run"
        run_dir.mkdir()
        (run_dir / "run.sqlite").write_bytes(damaged)
        code, output = invoke(["eval", "--persona", "A cowboy", *MODELS, "--run-dir", str(run_dir)])
        if code == 2:
            assert_one_line_error(code, output, "run.sqlite")
            assert (run_dir / "run.sqlite").read_bytes() == damaged  # refused and never overwritten
        else:
            assert code == 0, output  # the damage missed everything SQLite and the run read


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@example(how="overwrite", offset=3318, noise=b"\x80")  # a schema SQLite's error quotes, not UTF-8
@given(how=st.sampled_from(["truncate", "overwrite", "header", "zero page", "append"]),
       offset=st.integers(min_value=0, max_value=1 << 20), noise=st.binary(min_size=1, max_size=64))
def test_corrupted_checkpoints_are_refused_untouched_or_used_safely(finished_store: Path, how: str,
                                                                    offset: int, noise: bytes) -> None:
    """The same for the run's LangGraph checkpoints, resumed with a persona the run has not seen."""
    with tempfile.TemporaryDirectory() as folder:
        run_dir = Path(folder) / "run"
        run_dir.mkdir()
        for name in ("run.sqlite", "checkpoints.sqlite"):
            (run_dir / name).write_bytes((finished_store.parent / name).read_bytes())
        path = run_dir / "checkpoints.sqlite"
        damaged = _corrupt(path.read_bytes(), how, offset, noise)
        path.write_bytes(damaged)
        code, output = invoke(["eval", "--persona", "A nurse", *MODELS, "--run-dir", str(run_dir)])
        if code == 2:
            assert_one_line_error(code, output, "checkpoints.sqlite")
            assert path.read_bytes() == damaged
        else:
            assert code == 0, output


# --- the memory bank: import files and a damaged Chroma store -------------------------------------------
@FAST
@given(content=st.binary(max_size=2000))
def test_memory_import_accepts_or_names_the_file(content: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "memories.jsonl"
        path.write_bytes(content)
        code, output = invoke(["memory", "import", str(path), "--user", "u", "--memory-dir", f"{folder}/bank"])
        if code == 2:
            assert_one_line_error(code, output, path.name)
            assert not Path(folder, "bank").exists()  # the file is read before the bank is made
        else:
            assert code == 0 and output.startswith("imported "), output


@pytest.fixture(scope="module")
def bank_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from _cli import small_bank

    return small_bank(tmp_path_factory.mktemp("bank") / "bank", users=("bob",), n=20)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(how=st.sampled_from(["truncate", "overwrite", "header", "zero page", "append"]),
       offset=st.integers(min_value=0, max_value=1 << 20), noise=st.binary(min_size=1, max_size=64),
       command=st.sampled_from(["search", "add"]))
def test_a_damaged_memory_bank_is_refused_untouched_or_read_whole(bank_folder: Path, how: str, offset: int,
                                                                  noise: bytes, command: str) -> None:
    """Whatever the damage to a bank's chroma.sqlite3, a command refuses it in one line and leaves the bank
    as it was, or reads it whole: a search never answers "no memories" for a user who has them."""
    import shutil

    from _cli import tree

    with tempfile.TemporaryDirectory() as folder:
        bank = Path(folder) / "bank"
        shutil.copytree(bank_folder, bank)
        store = bank / "chroma.sqlite3"
        store.write_bytes(_corrupt(store.read_bytes(), how, offset, noise))
        before = tree(bank)
        args = (["memory", "search", "beach trip", "--user", "bob"] if command == "search"
                else ["memory", "add", "--user", "bob2", "--event", "a walk", "--id", "w1"])
        code, output = invoke([*args, "--memory-dir", str(bank)])
        if code == 2:
            assert_one_line_error(code, output, "chroma.sqlite3", "memory bank")
            assert tree(bank) == before
        else:
            assert code == 0 and "no memories for user" not in output, output
