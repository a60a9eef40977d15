"""Every run kind refuses a seed numpy cannot take (negative, or past 2**32 − 1) with its config: one line
naming ``--seed``, before any call or run file (judge-check made all its calls, then crashed on -5)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from personagraph.cli import app
from personagraph.errors import PersonagraphError
from personagraph.metrics.behavior import BehaviorConfig
from personagraph.metrics.longlamp import LongLaMPConfig
from personagraph.report.compare import compare_runs

ITEM = '{"id": "a", "persona": "A cowboy", "response": "I ride", "criterion": "overall", "human": 4}\n'
COMMANDS = {
    "eval": lambda tmp: ["eval", "--persona", "A nurse", "-m", "test:agent", "-j", "test:judge"],
    "simulate": lambda tmp: ["simulate", "--persona", "A nurse", "--model", "test:agent", "--user-model",
                             "test:user", "--no-judge"],
    "meta-eval": lambda tmp: ["meta-eval", "--items", str(_items(tmp)), "--judge", "test:judge"],
    "judge-check": lambda tmp: ["judge-check", "--items", str(_items(tmp)), "--judge", "test:judge",
                                "--generator", "test:agent"],
}


def _items(tmp: Path) -> Path:
    path = tmp / "items.jsonl"
    path.write_text(ITEM)
    return path


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("seed", ["-5", str(2**32)])
def test_a_seed_numpy_cannot_take_is_one_line_before_anything_runs(tmp_path: Path, command: str,
                                                                   seed: str) -> None:
    run_dir = tmp_path / "run"
    args = [*COMMANDS[command](tmp_path), "--seed", seed, "--run-dir", str(run_dir)]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --seed: Input should be"), result.output
    assert not run_dir.exists()


@pytest.mark.parametrize(("config", "fields"), [
    (BehaviorConfig, {"dialogues": "dialogues.jsonl"}),
    (LongLaMPConfig, {"data": "data.jsonl", "model": "test:agent"}),
])
def test_the_metric_runs_take_the_same_seeds(config: type, fields: dict[str, str]) -> None:
    assert config(**fields, seed=2**32 - 1).seed == 2**32 - 1
    with pytest.raises(ValidationError, match="greater than or equal to 0"):
        config(**fields, seed=-5)


def test_compare_refuses_a_bad_seed_before_reading_any_run(tmp_path: Path) -> None:
    with pytest.raises(PersonagraphError, match=r"^--seed -5: a bootstrap seed is a whole number"):
        compare_runs(tmp_path / "missing", tmp_path / "missing", seed=-5)
