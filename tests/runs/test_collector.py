"""A batch process settles Python's garbage collector before its run: what exists is frozen out of the passes,
and passes come at personagraph's thresholds (``runs.base.settle_collector``), not at the default 700;
every CLI command that runs an event loop does it first."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest
from typer.testing import CliRunner

from personagraph.cli import _common, app
from personagraph.runs.base import COLLECTOR_THRESHOLDS, settle_collector


@pytest.fixture
def collector():
    """The test process's collector as it was, restored afterwards."""
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


def test_settling_freezes_what_exists_and_raises_the_thresholds(collector) -> None:
    gc.unfreeze()
    gc.set_threshold(700, 10, 10)
    alive = [[i] for i in range(100)]  # container objects that exist before the run
    settle_collector()
    assert gc.get_threshold() == COLLECTOR_THRESHOLDS
    assert COLLECTOR_THRESHOLDS[0] > 700
    assert gc.get_freeze_count() >= len(alive)


@pytest.mark.parametrize("args", [
    ["eval", "-m", "test:agent", "-j", "test:judge", "--persona", "A cowboy", "--quick"],
    ["simulate", "--model", "test:agent", "--user-model", "test:user", "--no-judge", "--persona", "A cowboy"],
])
def test_a_command_settles_the_collector_before_its_run(tmp_path: Path, monkeypatch, collector, args) -> None:
    calls: list[str] = []
    monkeypatch.setattr(_common, "settle_collector", lambda: calls.append("settled"))
    result = CliRunner().invoke(app, [*args, "--run-dir", str(tmp_path / "run")], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert calls == ["settled"]
