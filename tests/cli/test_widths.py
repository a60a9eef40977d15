"""Every table the commands print fits an 80-column terminal: headers whole (wrapped between words or
stacked, never cut to ``Ling…``), every line within 80 characters, and no ``-0.00``."""

from __future__ import annotations

import re

import pytest
from rich.cells import cell_len
from typer.testing import CliRunner

from personagraph.cli import app
from personagraph.schemas import TASK_NAMES

COWBOY = "A 70-year-old retired cowboy from Texas"
TABLE_LINE = re.compile(r"[│┃━─]|\S  +\S")  # a border, or cells apart (prose lines, one to copy, may run on)
CUT = re.compile(r"[A-Za-z_]…")  # rich's ellipsis at the end of a cut word (a CI's "…" follows a digit)


def _cli(*args: str) -> str:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.fixture(scope="module")
def printed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """What each command prints at 80 columns, from runs made with the test models."""
    root = tmp_path_factory.mktemp("widths")
    eval_dir, sim_dir = root / "eval", root / "sim"
    out = {"eval": _cli("eval", "--quick", "--persona", COWBOY, "--persona", "A pediatric nurse", "--model",
                        "test:agent", "--model", "test:other-agent", "--judge", "test:j1", "--generator", "test:gen",
                        "--run-dir", str(eval_dir))}
    out["view eval"] = _cli("view", str(eval_dir))
    out["compare"] = _cli("compare", str(eval_dir), str(eval_dir), "--model-a", "test:agent", "--model-b",
                          "test:other-agent")
    out["simulate"] = _cli("simulate", "--persona", COWBOY, "--model", "test:agent", "--user-model", "test:u",
                           "--judge", "test:j1", "--turns", "3", "--sessions", "2", "--adversarial",
                           "--run-dir", str(sim_dir))
    out["view simulate"] = _cli("view", str(sim_dir))
    transcript = next((sim_dir / "transcripts").glob("*.jsonl"))
    out["judge-session"] = _cli("judge-session", str(transcript), "--judge", "test:j2", "--run-dir",
                                str(root / "judged"))
    return out


@pytest.mark.parametrize("command", ["eval", "view eval", "compare", "simulate", "view simulate",
                                     "judge-session"])
def test_every_printed_table_fits_80_columns(printed: dict[str, str], command: str) -> None:
    text = printed[command]
    assert text.strip()
    rows = [line for line in text.splitlines() if TABLE_LINE.search(line.strip())]
    assert rows, text
    for line in rows:
        assert cell_len(line) <= 80, f"{command}: {line!r}"
    assert not CUT.findall(text), f"{command}: a cut header or cell:\n{text}"
    assert "-0.00" not in text and "-0.000" not in text, text


def test_the_headers_that_were_cut_are_whole(printed: dict[str, str]) -> None:
    words = {w for task in TASK_NAMES for w in task.split()}
    for command in ("compare", "simulate"):
        found = set(re.findall(r"[A-Za-z]+", printed[command]))
        assert {w for w in words if w in printed[command]} <= found, command
    assert {"contradictions", "consistency"} <= set(re.findall(r"[a-z]+", printed["simulate"]))
    assert "Justification" in printed["compare"] and "Consistency" in printed["compare"]


def test_a_slope_that_rounds_to_zero_is_shown_as_zero() -> None:
    from personagraph.report.tables import fmt

    assert [fmt(v, "slope") for v in (-0.001, 0.0, -0.0, 0.004, 0.25, -1.5)] == [
        "0.00", "0.00", "0.00", "0.00", "+0.25", "-1.50"]
