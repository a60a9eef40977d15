"""personagraph report / view / compare at the command line: outputs, exports, one-line errors (exit 2)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from personagraph.cli import app

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, list(args))


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cli") / "run"
    result = invoke("-q", "eval", "--persona", "A 70-year-old retired cowboy from Texas", "--persona", "A nurse",
                    "--model", "test:a", "--model", "test:b", "--judge", "test:j1", "--judge", "test:j2",
                    "--environments", "2", "--run-dir", str(path))
    assert result.exit_code == 0, result.output
    return path


def test_report_writes_one_html_file(run_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out" / "report.html"
    result = invoke("report", str(run_dir), "-o", str(out), "--title", "Cowboys <&> nurses", "--lowest", "3")
    assert result.exit_code == 0, result.output
    assert "report:" in result.output and out.is_file()
    text = out.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and "<title>Cowboys &lt;&amp;&gt; nurses</title>" in text
    summary = json.loads((run_dir / "summary.json").read_text())
    for result_ in summary["models"].values():
        assert f"{result_['persona_score']:.2f}" in text


def test_view_prints_the_headline(run_dir: Path) -> None:
    result = invoke("view", str(run_dir))
    assert result.exit_code == 0, result.output
    summary = json.loads((run_dir / "summary.json").read_text())
    for model, values in summary["models"].items():
        assert model in result.output and f"{values['persona_score']:.2f}" in result.output
    for text in ("PersonaScore", "95% CI", "refusal", "verdicts", "judge α", "tokens", "cost"):  # 80 columns
        assert text in result.output


@pytest.mark.parametrize("fmt", ["csv", "json", "markdown"])
def test_view_exports(run_dir: Path, fmt: str, tmp_path: Path) -> None:
    summary = json.loads((run_dir / "summary.json").read_text())
    result = invoke("view", str(run_dir), "--format", fmt)
    assert result.exit_code == 0, result.output
    text = result.output
    if fmt == "csv":
        rows = list(csv.DictReader(io.StringIO(text)))
        assert [r["model"] for r in rows] == list(summary["models"])
        for row in rows:
            expected = summary["models"][row["model"]]
            assert float(row["PersonaScore"]) == pytest.approx(expected["persona_score"])
            assert float(row["95% CI low"]) == pytest.approx(expected["ci"][0])
            assert float(row["Expected Action"]) == pytest.approx(expected["tasks"]["Expected Action"]["mean"])
            assert row["failed verdicts"] == "0" and row["refusal rate"] == "0.0"
    elif fmt == "json":
        rows = json.loads(text)["tables"][0]["rows"]
        assert {r["model"]: r["persona_score"] for r in rows} == pytest.approx(
            {m: v["persona_score"] for m, v in summary["models"].items()})
        assert rows[0]["tasks"]["Toxicity Control"]["ci"] == summary["models"][rows[0]["model"]]["tasks"][
            "Toxicity Control"]["ci"]
    else:
        assert "| model | Expected Action |" in text
        for model, values in summary["models"].items():
            assert f"| {model} |" in text and f"{values['persona_score']:.2f}" in text
    out = tmp_path / f"headline.{fmt}"
    assert invoke("view", str(run_dir), "-f", fmt, "-o", str(out)).exit_code == 0
    assert out.read_text(encoding="utf-8") == text


def test_compare_two_models_of_one_run(run_dir: Path) -> None:
    result = invoke("compare", str(run_dir), str(run_dir), "--model-a", "test:a", "--model-b", "test:b")
    assert result.exit_code == 0, result.output
    for text in ("Expected", "all tasks", "95% CI", "Wilcoxon", "A = test:a", "B = test:b"):  # 80 columns
        assert text in result.output
    data = json.loads(invoke("compare", str(run_dir), str(run_dir), "-f", "json").output)
    assert data["model_a"] == "test:a" and data["model_b"] == "test:b"
    assert {t["task"] for t in data["tasks"]} <= {"Expected Action", "Action Justification", "Linguistic Habits",
                                                  "Persona Consistency", "Toxicity Control"}
    assert data["overall"]["n"] == data["shared"] > 0
    rows = list(csv.DictReader(io.StringIO(invoke("compare", str(run_dir), str(run_dir), "-f", "csv").output)))
    assert rows[-1]["task"] == "all tasks" and "Wilcoxon p" in rows[0]


def _corrupt(path: Path) -> None:
    path.mkdir()
    (path / "run.sqlite").write_bytes(b"\x00not sqlite\x00" * 500)


@pytest.mark.parametrize("command", ["report", "view", "compare"])
@pytest.mark.parametrize("make, message", [
    (lambda p: None, "no such run directory"),
    (lambda p: p.mkdir(), "not a run directory"),
    (_corrupt, "unreadable"),
])
def test_bad_run_dir_is_one_line_exit_2(tmp_path: Path, command: str, make, message: str, run_dir: Path) -> None:
    bad = tmp_path / "bad"
    make(bad)
    args = {"report": ["report", str(bad), "-o", str(tmp_path / "r.html")], "view": ["view", str(bad)],
            "compare": ["compare", str(run_dir), str(bad)]}[command]
    result = invoke(*args)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0], result.output
    assert "Traceback" not in result.output


def test_bad_flags(run_dir: Path, tmp_path: Path) -> None:
    result = invoke("view", str(run_dir), "--format", "xml")
    assert result.exit_code == 2 and "choose one of table, csv, json, markdown" in result.output
    result = invoke("report", str(run_dir), "-o", str(tmp_path))
    assert result.exit_code == 2 and "is a directory" in result.output
    result = invoke("compare", str(run_dir), str(run_dir), "--model-a", "test:absent")
    assert result.exit_code == 2 and "--model-a test:absent: not in" in result.output


def test_paths_with_markup_characters_print_as_text(run_dir: Path, tmp_path: Path) -> None:
    folder = tmp_path / "a[/b]c [bold]"
    result = invoke("report", str(run_dir), "-o", str(folder / "r.html"))
    assert result.exit_code == 0, result.output
    assert "a[/b]c [bold]" in result.output.replace("\n", "")
    result = invoke("view", str(run_dir), "-f", "json", "-o", str(folder / "h.json"))
    assert result.exit_code == 0 and (folder / "h.json").is_file()
