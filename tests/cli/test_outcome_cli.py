"""Every run kind's command tells the truth about its outcome: failed items → exit 3 and a one-line count
on stderr; ``--no-retry-failed`` keeps them; once the model is back, the same command recovers them (exit 0,
``retried``/``recovered`` on stderr). (behavior-alignment: tests/runs/test_behavior_outcome.py; its CLI has no
flag for fewer bootstrap resamples, and three runs at 2,000 take 12 s.)"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from personagraph.cli import app
from personagraph.runs.base import EXIT_INCOMPLETE
from tests.metrics.test_longlamp import write_jsonl
from tests.metrics.test_persobench import write_csv
from tests.runs.switch import switch_model
from tests.runs.test_judge_check import write_items as write_check_items
from tests.runs.test_meta_eval_outcome import write_items as write_meta_items


@dataclass(frozen=True)
class Case:
    down: Callable[[str], bool]  # the requests the model fails while it is down
    args: Callable[[Path, str], list[str]]  # (folder, model spec) → the command line
    failed: int  # failed items of the first run


CASES = {
    "meta-eval": Case(lambda text: "storm" in text, lambda tmp, spec: [
        "meta-eval", "--items", str(write_meta_items(tmp / "items.jsonl")), "--judge", spec,
        "--resamples", "100"], 2),
    "judge-check": Case(lambda text: "fjord" in text, lambda tmp, spec: [
        "judge-check", "--items", str(write_check_items(tmp / "items.jsonl")), "--judge", spec,
        "--generator", spec, "--variant", "swap", "--n-resamples", "100"], 2),  # the original and its swap
    "persobench": Case(lambda text: "sushi" in text, lambda tmp, spec: [
        "persobench", "--data", str(write_csv(tmp)), "--model", spec, "--metrics", "dist"], 1),
    "longlamp": Case(lambda text: "boots" in text, lambda tmp, spec: [
        "longlamp", "--data", str(write_jsonl(tmp)), "--model", spec, "--retriever", "recency"], 1),
    "eval --judge-check": Case(lambda text: "plain, neutral language" in text, lambda tmp, spec: [
        "eval", "--persona", "A retired cowboy", "-m", "test:agent", "-j", "test:judge", "--generator", spec,
        "--environments", "1", "--questions-per-task", "1", "--judge-check", "1"], 5),  # its generic rewrites
    "simulate": Case(lambda text: text.count('"role": "user"') >= 2, lambda tmp, spec: [
        "simulate", "--persona", "A pediatric nurse", "--model", spec, "--user-model", "test:user",
        "--no-judge", "--turns", "2"], 1),
}


@pytest.mark.parametrize("command", list(CASES))
def test_exit_3_with_a_count_then_0_with_the_recovered_count(tmp_path: Path, command: str) -> None:
    case = CASES[command]
    model = switch_model(f"cli-{command.replace(' ', '')}", down=case.down)
    run_dir = tmp_path / "run"
    args = [*case.args(tmp_path, model.spec), "--run-dir", str(run_dir)]
    runner = CliRunner()
    down = runner.invoke(app, args, env={"COLUMNS": "160"})
    assert down.exit_code == EXIT_INCOMPLETE, down.output
    assert down.stderr.strip().splitlines()[-1] == (
        f"{case.failed} failed items (listed in {run_dir}); run the same command again to resume")
    kept = runner.invoke(app, [*args, "--no-retry-failed"], env={"COLUMNS": "160"})
    # the same outcome, unretried (the progress bars above it now count the reused items)
    assert kept.exit_code == EXIT_INCOMPLETE
    assert kept.stderr.strip().splitlines()[-1] == down.stderr.strip().splitlines()[-1]
    model.up()
    up = runner.invoke(app, args, env={"COLUMNS": "160"})
    assert up.exit_code == 0, up.output
    assert up.stderr.strip().splitlines()[-1] == f"retried: {case.failed}, recovered: {case.failed}"
