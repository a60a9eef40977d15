"""``personagraph meta-eval`` end to end: tables, meta_eval.json, resume, one-line errors, embedded judge."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from personagraph.cli import app
from personagraph.schemas import Answer, Verdict
from personagraph.store import RunStore

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "bench" / "meta_eval_sample"
runner = CliRunner()


def invoke(*args: str) -> Result:
    if "--resamples" not in args:
        args = (*args, "--resamples", "100")  # fast intervals: the statistics are tested in tests/judges
    return runner.invoke(app, ["meta-eval", *args], env={"COLUMNS": "140"})


def test_sample_file_runs_and_resumes(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    args = (
        "--items",
        str(SAMPLE / "items.jsonl"),
        "--judge",
        "test:cli-a",
        "--judge",
        "test:cli-b",
        "--run-dir",
        str(run_dir),
    )
    first = invoke(*args)
    assert first.exit_code == 0, first.output
    for text in (
        "expected_action — agreement",
        "persona_consistency — agreement",
        "overall — agreement",
        "test:cli-a",
        "ensemble",
        "Spearman ρ",
        "Kendall τ",
        "QW κ",
        "MAE",
        "len ρ",
        "humans' Krippendorff α",
        "baseline: length",
        "baseline: word_overlap",
        "LLM calls this run: 10",
    ):
        assert text in first.output, text
    summary = json.loads((run_dir / "meta_eval.json").read_text())
    for section in summary["results"].values():  # beside every judge: the baselines and the standing
        assert set(section["baselines"]) == {"length", "word_overlap", "embedding_similarity"}
        assert all("vs_best_baseline" in row for row in section["judges"].values())
    assert summary["n_records"] == 5 and set(summary["criteria"]) == {
        "expected_action",
        "persona_consistency",
    }
    assert summary["results"]["overall"]["judges"]["ensemble"]["n"] == 5
    second = invoke(*args)
    assert second.exit_code == 0 and "LLM calls this run: 0" in second.output
    assert json.loads((run_dir / "meta_eval.json").read_text())["results"] == summary["results"]


def test_csv_sample_reuses_the_jsonl_verdicts(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    assert (
        invoke(
            "--items", str(SAMPLE / "items.jsonl"), "-j", "test:cli-a", "--run-dir", str(run_dir)
        ).exit_code
        == 0
    )
    result = invoke(
        "--items",
        str(SAMPLE / "items.csv"),
        "-j",
        "test:cli-a",
        "--run-dir",
        str(run_dir),
        "--criteria",
        "Expected Action,persona_consistency",
    )
    assert result.exit_code == 0, result.output
    assert "LLM calls this run: 0" in result.output


def test_user_rubric_and_criteria_filter(tmp_path: Path) -> None:
    rubric = tmp_path / "warmth.yaml"
    rubric.write_text(
        "task: Warmth\nscale: [0, 3]\ncriterion: warmth\nscores: {0: cold, 1: meh, 2: warm, 3: hot}\n"
    )
    items = tmp_path / "items.jsonl"
    items.write_text(
        "".join(
            json.dumps(
                {
                    "id": str(i),
                    "response": "hi " * (i + 1),
                    "criterion": "warmth",
                    "human": i % 4,
                    "scale": [0, 3],
                }
            )
            + "\n"
            for i in range(6)
        )
    )
    result = invoke(
        "--items",
        str(items),
        "--rubric",
        str(rubric),
        "-j",
        "test:cli-a",
        "--criteria",
        "warmth",
        "--run-dir",
        str(tmp_path / "run"),
    )
    assert result.exit_code == 0, result.output
    assert "warmth — agreement" in result.output and "overall" not in result.output


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"id": "1", "response": "r", "criterion": "expected_action"}\n', "row 1: missing column 'human'"),
        (
            '{"id": "1", "response": "r", "criterion": "nope", "human": 3}\n',
            "row 1 (id 1): unknown criterion 'nope'",
        ),
        (
            '{"id": "1", "response": "r", "criterion": "expected_action", "human": 9}\n',
            "row 1 (id 1): human rating 9 is outside the scale [1, 5]",
        ),
        (
            '{"id": "1", "response": "r", "criterion": "expected_action", "human": 3, "scale": [3, 3]}\n',
            "row 1 (id 1): scale: [3, 3]: min must be below max",
        ),
    ],
)
def test_bad_input_is_one_line_exit_2(tmp_path: Path, content: str, message: str) -> None:
    items = tmp_path / "items.jsonl"
    items.write_text(content)
    result = invoke("--items", str(items), "-j", "test:cli-a", "--run-dir", str(tmp_path / "run"))
    assert result.exit_code == 2
    assert result.output.startswith("error: ") and result.output.count("\n") == 1
    assert f"{items}: {message}" in " ".join(result.output.split())
    assert "Traceback" not in result.output


def test_needs_items_or_self_preference(tmp_path: Path) -> None:
    result = invoke("--run-dir", str(tmp_path / "run"))
    assert result.exit_code == 2 and "give --items FILE, --benchmark NAME (e.g. persona), --self-preference RUN_DIR" in result.output
    result = invoke("--items", str(tmp_path / "missing.jsonl"), "--run-dir", str(tmp_path / "run"))
    assert result.exit_code == 2 and "missing.jsonl: no such file" in result.output
    result = invoke("--items", str(SAMPLE / "items.jsonl"), "-j", "bogus", "--run-dir", str(tmp_path / "run"))
    assert result.exit_code == 2 and "model spec 'bogus'" in result.output


def make_eval_run(run_dir: Path) -> None:
    """Two families: ``test:alpha-judge`` adds 1 to its own family's answers; ``test:delta-judge`` is fair."""
    store = RunStore(run_dir)
    store.set_meta("kind", "eval")
    for q in range(12):
        for m, model in enumerate(("test:alpha-agent", "test:beta-agent")):
            answer = Answer(
                id=f"a{q}-{m}",
                question_id=f"q{q}",
                persona_id="p",
                task="Expected Action",
                model=model,
                status="ok",
                text="text",
            )
            store.put("answer", answer.id, answer)
            quality = 1 + (q * 7 + m * 3) % 4
            for judge in ("test:alpha-judge", "test:delta-judge"):
                score = quality + (judge == "test:alpha-judge" and m == 0)
                store.put(
                    "verdict",
                    f"{judge}-{answer.id}",
                    Verdict(
                        id=f"{judge}-{answer.id}", answer_id=answer.id, judge=judge, status="ok", score=score
                    ),
                )
    store.close()


def test_self_preference_table(tmp_path: Path) -> None:
    make_eval_run(tmp_path / "eval")
    result = invoke("--self-preference", str(tmp_path / "eval"), "--run-dir", str(tmp_path / "run"))
    assert result.exit_code == 0, result.output
    assert "Self-preference" in result.output and "test:alpha-judge" in result.output
    assert "test:delta-judge" in result.output
    summary = json.loads((tmp_path / "run" / "meta_eval.json").read_text())
    rows = {r["judge"]: r for r in summary["self_preference"]["judges"]}
    assert rows["test:alpha-judge"]["controlled"]["gap"] == 1.0
    assert rows["test:delta-judge"]["note"] == "no answers of its own family"


@pytest.mark.embedded
@pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="llama-cpp-python not installed")
def test_embedded_judge_end_to_end(tmp_path: Path) -> None:
    """Two records through the real embedded judge: the command finishes and prints the table."""
    items = tmp_path / "items.jsonl"
    lines = (SAMPLE / "items.jsonl").read_text().splitlines()
    items.write_text("\n".join(lines[2:4]) + "\n")  # pc-1 (good) and pc-2 (breaks character)
    run_dir = tmp_path / "run"
    result = invoke("--items", str(items), "--judge", "local:qwen2.5-coder-1.5b", "--run-dir", str(run_dir))
    assert result.exit_code == 0, result.output
    assert "persona_consistency — agreement" in result.output and "local:qwen2.5-coder-1.5b" in result.output
    summary = json.loads((run_dir / "meta_eval.json").read_text())
    row = summary["results"]["persona_consistency"]["judges"]["local:qwen2.5-coder-1.5b"]
    assert row["n"] + row["failed"] == 2
    again = invoke("--items", str(items), "--judge", "local:qwen2.5-coder-1.5b", "--run-dir", str(run_dir))
    assert again.exit_code == 0 and "LLM calls this run: 0" in again.output
    shutil.rmtree(run_dir)
