"""``personagraph judge-check`` end to end: both inputs, the table and verdict lines, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from personagraph.cli import app
from personagraph.judges.validity import VARIANT_KINDS
from personagraph.runs import eval as eval_run

runner = CliRunner()


def invoke(*args: str) -> Result:
    return runner.invoke(app, ["judge-check", *args, "--n-resamples", "100"], env={"COLUMNS": "160"})


@pytest.fixture(scope="module")
def eval_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("eval") / "run"
    config = eval_run.EvalConfig(
        personas=["A 70-year-old retired cowboy from Texas"],
        models=["test:agent"],
        judges=["test:j1"],
        generator="test:gen",
        environments=2,
        questions_per_task=1,
    )
    eval_run.run_sync(config, run_dir)
    return run_dir


def test_from_an_eval_run_prints_every_variant_and_a_verdict_line(eval_dir: Path, tmp_path: Path) -> None:
    result = invoke("--from", str(eval_dir), "--run-dir", str(tmp_path / "check"))
    assert result.exit_code == 0, result.output
    assert "Judge validity: test:j1" in result.output
    for kind in VARIANT_KINDS:
        assert f"{kind} →" in result.output
    assert "test:j1: WARN" in result.output or "test:j1: PASS" in result.output
    written = json.loads((tmp_path / "check" / "judge_check.json").read_text())
    assert written["n_items"] == 5 and set(written["results"]["test:j1"]["variants"]) == set(VARIANT_KINDS)
    again = invoke("--from", str(eval_dir), "--run-dir", str(tmp_path / "check"))
    assert "LLM calls this run: 0" in again.output


def test_items_file_with_chosen_variants_and_judges(tmp_path: Path) -> None:
    items = tmp_path / "items.jsonl"
    # the meta-eval items format, as in judge-dev/persona_swap.jsonl
    lines = [
        json.dumps(
            {
                "id": str(i),
                "persona": f"i collect {w}. i live by the sea",
                "question": "User1: hobbies?",
                "response": f"i like {w}",
                "criterion": "persona_consistency",
                "human": [5],
                "scale": [1, 5],
            }
        )
        for i, w in enumerate(["kites", "boats", "jazz records", "teapots"])
    ]
    items.write_text("\n".join(lines) + "\n")
    result = invoke(
        "--items",
        str(items),
        "--judge",
        "test:a",
        "--judge",
        "test:b",
        "--generator",
        "test:gen",
        "--variant",
        "swap",
        "--variant",
        "padding",
        "--run-dir",
        str(tmp_path / "check"),
    )
    assert result.exit_code == 0, result.output
    assert "Judge validity: test:a" in result.output and "Judge validity: test:b" in result.output
    assert "swap →" in result.output and "padding →" in result.output and "generic →" not in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "give exactly one of --from RUN_DIR or --items FILE"),
        (("--from", "a", "--items", "b"), "give exactly one of --from RUN_DIR or --items FILE"),
        (("--from", "nowhere"), "--from nowhere: not a run directory"),
        (("--items", "missing.jsonl"), "missing.jsonl: no such file"),
        (("--items", "x.jsonl", "--variant", "rhyme"), "--variant: unknown kind 'rhyme'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    args: tuple[str, ...], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = invoke(*args)
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in result.output


def test_a_non_eval_run_is_refused(eval_dir: Path, tmp_path: Path) -> None:
    first = invoke("--from", str(eval_dir), "--run-dir", str(tmp_path / "check"), "--variant", "swap")
    assert first.exit_code == 0, first.output
    result = invoke("--from", str(tmp_path / "check"), "--run-dir", str(tmp_path / "again"))
    assert result.exit_code == 2 and "holds a judge-check run, not an eval run" in result.output
