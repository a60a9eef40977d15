"""The third red-team pass (findings 2026-12-04, N-1 … N-21): one parametrised test per finding. Offline:
``test:*`` models, plug-in agents defined here and ``bench/fake_openai.py`` on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import math
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from personagraph.cli import app
from personagraph.errors import PersonagraphError
from personagraph.testing import PersonaAssertionError, PersonaTester

FAST = ["--environments", "1", "--questions-per-task", "1"]
PERSONA = "A retired cowboy from Texas"
EVAL = ["eval", "--persona", PERSONA, "-j", "test:j1", *FAST]


def cli(*args: str, input: str | bytes | None = None) -> tuple[int, str]:
    """Runs the CLI in this process: (exit code, stdout + stderr)."""
    result = CliRunner().invoke(app, ["-q", *args], catch_exceptions=False, input=input)
    return result.exit_code, result.output


def one_line_error(output: str) -> str:
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), output
    assert "internal error" not in output and "Traceback" not in output
    return lines[0]


def tree(path: Path) -> dict[str, bytes]:
    """Every file under ``path`` with its bytes: what must stay unchanged."""
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def summary_of(run_dir: Path) -> dict:
    return json.loads((run_dir / "summary.json").read_text())


# --- N-1: a persona test fails when its agent never answered; thresholds are checked up front ----------
def crashing_agent(messages: list[dict]) -> str:
    raise RuntimeError("plug-in agent crashed on purpose")


async def async_crashing_agent(messages: list[dict]) -> str:
    raise RuntimeError("async plug-in agent crashed on purpose")


def none_agent(messages: list[dict]) -> None:
    return None


@pytest.mark.parametrize("agent,reason", [
    (crashing_agent, "crashed on purpose"),
    (async_crashing_agent, "crashed on purpose"),
    (none_agent, "failed"),
    ("test:down", "failed"),
], ids=["crash", "async-crash", "none-reply", "test-down"])
def test_n01_a_run_whose_agent_failed_fails_the_persona_test(tmp_path: Path, agent: object, reason: str) -> None:
    tester = PersonaTester("t::n01", tmp_path)
    with pytest.raises(PersonaAssertionError) as failed:
        tester.assert_persona(agent, PERSONA, judges=["test:j1"], min_score=1)
    message = str(failed.value)
    assert "the run did not complete" in message and reason in message


@pytest.mark.parametrize("kwargs,named", [
    ({"min_score": float("nan")}, "min_score"),
    ({"min_score": -1}, "min_score"),
    ({"min_score": 10}, "min_score"),
    ({"min_score": True}, "min_score"),
    ({"tasks": {"toxicity": float("nan")}}, "tasks"),
    ({"tasks": {"toxicity": 6}}, "tasks"),
], ids=["nan", "negative", "above-scale", "bool", "task-nan", "task-above"])
def test_n01_a_threshold_off_the_scale_is_refused_before_any_call(tmp_path: Path, kwargs: dict,
                                                                  named: str) -> None:
    tester = PersonaTester("t::n01", tmp_path)
    with pytest.raises(PersonagraphError, match=named) as refused:
        tester.assert_persona("test:agent", PERSONA, judges=["test:j1"], **kwargs)
    assert "\n" not in str(refused.value) and not tester.ledger.runs
    assert not (tmp_path / ".personagraph").exists()


@pytest.mark.parametrize("kwargs", [{"min_consistency": float("nan")}, {"min_consistency": 0},
                                    {"max_drift": -1}, {"max_drift": float("inf")}],
                         ids=["consistency-nan", "consistency-0", "drift-negative", "drift-inf"])
def test_n01_a_session_threshold_off_the_scale_is_refused(tmp_path: Path, kwargs: dict) -> None:
    tester = PersonaTester("t::n01", tmp_path)
    with pytest.raises(PersonagraphError, match=next(iter(kwargs))):
        tester.assert_session("test:agent", PERSONA, judges=["test:j1"], user_model="test:user", turns=1,
                              **kwargs)
    assert not tester.ledger.runs


def test_n01_a_session_run_whose_agent_failed_fails(tmp_path: Path) -> None:
    tester = PersonaTester("t::n01", tmp_path)
    with pytest.raises(PersonaAssertionError, match="the run did not complete"):
        tester.assert_session("test:down", PERSONA, judges=["test:j1"], user_model="test:user", turns=1,
                              sessions=1, min_consistency=None)


def test_n01_a_throwaway_project_whose_agent_crashes_fails_naming_the_crash(tmp_path: Path) -> None:
    (tmp_path / "agents_rt.py").write_text(textwrap.dedent("""
        def crash(messages):
            raise RuntimeError("plug-in agent crashed on purpose")
    """))
    (tmp_path / "test_persona.py").write_text(textwrap.dedent("""
        from personagraph.testing import assert_persona

        def test_cowboy():
            assert_persona("agents_rt:crash", "A retired cowboy from Texas", judges=["test:j1"], min_score=1)
    """))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_persona.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])})
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 failed" in done.stdout and "plug-in agent crashed on purpose" in done.stdout


# --- N-2: a judge-check/ link in an eval run directory is refused ------------------------------------
def test_n02_a_judge_check_link_is_refused_and_its_target_untouched(tmp_path: Path) -> None:
    run_dir, outside = tmp_path / "run", tmp_path / "outside"
    outside.mkdir()
    assert cli(*EVAL, "-m", "test:agent", "--run-dir", str(run_dir))[0] == 0
    (run_dir / "judge-check").symlink_to(outside)
    code, output = cli(*EVAL, "-m", "test:agent", "--judge-check", "1", "--run-dir", str(run_dir))
    assert code == 2 and "judge-check: is a symbolic link" in one_line_error(output)
    assert list(outside.iterdir()) == []


# --- N-3: a store that lost its records beside finished checkpoints ------------------------------------
@pytest.mark.parametrize("lost", [
    "DELETE FROM records",
    "DELETE FROM records WHERE kind IN ('verdict', 'item_score', 'unit_done', 'persona_done')",
    "DELETE FROM records; DELETE FROM calls",
], ids=["all-records", "verdicts-and-ends", "records-and-calls"])
def test_n03_lost_records_are_run_again_and_the_scores_equal_the_first_run(tmp_path: Path, lost: str) -> None:
    run_dir = tmp_path / "run"
    command = [*EVAL, "-m", "test:agent", "--run-dir", str(run_dir)]
    assert cli(*command)[0] == 0
    first = summary_of(run_dir)
    db = sqlite3.connect(run_dir / "run.sqlite")
    db.executescript(lost)
    db.close()
    code, output = cli(*command)
    again = summary_of(run_dir)
    assert code == 0, output
    assert again["models"] == first["models"] and again["verdicts"] == first["verdicts"] > 0


# --- N-4: a changed --samples scores the samples it asks for ------------------------------------------
def test_n04_fewer_samples_on_a_run_dir_score_only_those(tmp_path: Path) -> None:
    base = [*EVAL, "-m", "test:seeded"]
    assert cli(*base, "--samples", "3", "--run-dir", str(tmp_path / "three"))[0] == 0
    assert cli(*base, "--samples", "1", "--run-dir", str(tmp_path / "three"))[0] == 0
    assert cli(*base, "--samples", "1", "--run-dir", str(tmp_path / "one"))[0] == 0
    reused, fresh = summary_of(tmp_path / "three"), summary_of(tmp_path / "one")
    assert reused["models"]["test:seeded"]["answers"] == fresh["models"]["test:seeded"]["answers"] == 5
    assert reused["models"]["test:seeded"]["persona_score"] == fresh["models"]["test:seeded"]["persona_score"]
    assert reused["llm_calls"] == 0


# --- N-5: eval --judge-check asks with the eval's protocol and says which ------------------------------
def test_n05_the_judge_check_uses_the_eval_protocol(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    code, output = cli(*EVAL, "-m", "test:agent", "--judge-check", "1", "--judge-protocol", "rationale",
                       "--run-dir", str(run_dir))
    assert code in (0, 3), output
    check = json.loads((run_dir / "judge-check" / "judge_check.json").read_text())
    assert check["protocols"] == {"test:j1": "rationale"}
    assert "judge check protocols: test:j1 rationale" in output


# --- N-12: failed control arms are incomplete and never flag the judges ----------------------------------
def test_n12_controls_of_a_failing_agent_flag_nothing(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    code, output = cli(*EVAL, "-m", "test:down", "--controls", "--run-dir", str(run_dir))
    controls = summary_of(run_dir)["controls"]
    assert code == 3 and not controls["flagged"] and not controls["flags"]
    assert all(row["incomplete"] and not row["flagged"] for row in controls["standing"])
    assert controls["arms"]["control:contrast:test:down"]["incomplete"] is True
    assert "NOT clearly below" not in output and "no verdict on the judges" in output
