"""Provenance: what a run's numbers depend on is recorded with the run, shown by view, checked by compare."""

from __future__ import annotations

import shutil
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from personagraph import provenance
from personagraph.cli import app
from personagraph.models import LOCAL_MODELS
from personagraph.provenance import (
    data_file_hashes,
    differences,
    library_versions,
    llama_server_build,
    weight_hashes,
)
from personagraph.resources import data_hash, read_text
from personagraph.store import RunStore

RUBRIC = "judges/rubrics/persona_consistency.yaml"


def test_the_libraries_that_shape_results_are_recorded():
    versions = library_versions()
    for name in ("personagraph", "langgraph", "langchain-core", "openai", "chromadb", "transformers", "torch",
                 "sentence-transformers"):
        assert versions.get(name), name


def test_the_llama_cpp_server_build_is_recorded(tmp_path, monkeypatch):
    server = tmp_path / "llama-server"
    server.write_text("#!/bin/sh\necho 'version: 4242 (abc1234)' >&2\necho 'built with cc for x86_64' >&2\n")
    server.chmod(server.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PERSONAGRAPH_LLAMA_SERVER", str(server))
    assert library_versions()["llama.cpp"] == "4242 (abc1234)"
    silent = tmp_path / "silent"
    silent.write_text("#!/bin/sh\nexit 1\n")
    silent.chmod(silent.stat().st_mode | stat.S_IXUSR)
    assert llama_server_build(silent) is None


def test_data_files_read_are_hashed_and_a_changed_file_keeps_both_hashes():
    read_text(RUBRIC)
    read_text("report/prices.yaml")
    hashes = data_file_hashes()
    assert hashes[RUBRIC] == data_hash(RUBRIC)
    assert "report/prices.yaml" not in hashes  # shapes how results look, not what they are
    resumed = data_file_hashes({RUBRIC: "0123456789ab"})
    assert resumed[RUBRIC] == f"0123456789ab+{data_hash(RUBRIC)}"
    assert data_file_hashes(resumed)[RUBRIC] == resumed[RUBRIC]  # the same file again: nothing added


def test_weights_of_every_embedded_model_named_in_the_config():
    config = {"models": ["local:qwen2.5-coder-0.5b", "test:a"], "judges": ["local:qwen2.5-coder-1.5b"],
              "generator": None, "nested": {"user_model": "local:qwen2.5-coder-0.5b"}}
    weights = weight_hashes(config)
    assert weights == {f"local:{name}": model.sha256 for name, model in LOCAL_MODELS.items()}
    assert all(len(sha) == 64 for sha in weights.values())
    assert weight_hashes({"models": ["openai:gpt-4o", "local:unknown"]}) == {}


def test_the_weights_of_a_model_the_process_scored_text_with_are_recorded(monkeypatch):
    """The evidence judge's likelihood features read an embedded model: its weights are part of what the
    scores depend on."""
    monkeypatch.setattr(provenance, "scored_models", lambda: ["qwen2.5-coder-1.5b"])
    sha = LOCAL_MODELS["qwen2.5-coder-1.5b"].sha256
    assert provenance.scoring_weight_hashes() == {"likelihood:qwen2.5-coder-1.5b": sha}
    monkeypatch.setattr(provenance, "scored_models", lambda: ["test"])
    assert provenance.scoring_weight_hashes() == {"likelihood:test": "deterministic, no weights"}
    monkeypatch.setattr(provenance, "scored_models", lambda: [])
    assert provenance.scoring_weight_hashes() == {}


def test_differences_name_each_entry_both_runs_record_differently():
    a = {"versions": {"torch": "2.13.0", "openai": "3.5"},
         "data_files": {RUBRIC: "aaa", "prompts/x.yaml": "1"}, "weights": {"local:m": "s1"}}
    b = {"versions": {"torch": "2.14.0", "openai": "3.5"}, "data_files": {RUBRIC: "bbb"},
         "weights": {"local:other": "s2"}}
    assert differences(a, b) == ["versions torch: A 2.13.0, B 2.14.0", f"data_files {RUBRIC}: A aaa, B bbb"]
    assert differences(a, a) == []
    assert differences({}, b) == []  # a run from before provenance was recorded


@pytest.fixture(scope="module")
def eval_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("provenance") / "a"
    result = CliRunner().invoke(app, ["-q", "eval", "--persona", "A 70-year-old retired cowboy from Texas",
                                      "--model", "test:a", "--judge", "test:j1", "--environments", "2",
                                      "--questions-per-task", "1", "--run-dir", str(run_dir)])
    assert result.exit_code == 0, result.output
    return run_dir


def _meta(run_dir: Path, key: str):
    store = RunStore(run_dir, readonly=True, lock=False)
    try:
        return store.get_meta(key)
    finally:
        store.close()


def test_an_eval_run_records_its_provenance(eval_run):
    assert _meta(eval_run, "versions")["langgraph"] == library_versions()["langgraph"]
    # test models only: no local: weights (a likelihood: entry when an earlier test in this process scored)
    assert not [key for key in _meta(eval_run, "weights") if not key.startswith("likelihood:")]
    files = _meta(eval_run, "data_files")
    for path in (RUBRIC, "judges/refusal_markers.yaml", "environments/pool.yaml", "environments/tasks.yaml",
                 "prompts/judge.yaml", "prompts/persona.yaml"):
        assert files.get(path) == data_hash(path), path


def test_view_shows_the_provenance(eval_run):
    result = CliRunner().invoke(app, ["view", str(eval_run)], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "provenance" in result.output
    assert f"langgraph {library_versions()['langgraph']}" in result.output
    assert f"{RUBRIC} {data_hash(RUBRIC)}" in result.output


def test_compare_warns_when_a_rubric_differs(eval_run, tmp_path):
    other = tmp_path / "b"
    shutil.copytree(eval_run, other)
    store = RunStore(other)
    try:
        store.set_meta("data_files", {**store.get_meta("data_files"), RUBRIC: "0123456789ab"})
    finally:
        store.close()
    result = CliRunner().invoke(app, ["compare", str(eval_run), str(other)], terminal_width=200)
    assert result.exit_code == 0, result.output
    warning = f"warning: the runs differ in data_files {RUBRIC}: A {data_hash(RUBRIC)}, B 0123456789ab"
    assert warning in result.output
    same = CliRunner().invoke(app, ["compare", str(eval_run), str(eval_run)], terminal_width=200)
    assert "warning" not in same.output
