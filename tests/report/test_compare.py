"""compare: paired on shared questions, Wilcoxon + paired bootstrap CI, Holm, model and judge choice."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from report_helpers import run_eval
from scipy import stats

from personagraph.errors import PersonagraphError
from personagraph.models.testing import register_script
from personagraph.report.compare import ALL, compare_runs, holm, paired_difference, verdict
from personagraph.report.tables import export
from personagraph.store import RunStore

register_script("good", lambda messages, schema: "GOOD answer, said like a true sailor.")
register_script("meh", lambda messages, schema: "meh answer.")


def _fair_judge(messages, schema):
    text = json.dumps(messages)
    return json.dumps({"rationale": "fair", "score": 5 if "GOOD answer" in text else 1})


register_script("fair", _fair_judge)


@pytest.fixture(scope="module")
def good_vs_meh(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("good") / "run"
    with pytest.MonkeyPatch.context() as monkeypatch:
        run_eval(run_dir, monkeypatch, "--persona", "A sailor", "--persona", "A baker", "--persona", "A pilot",
                 "--model", "test:meh", "--model", "test:good", "--judge", "test:fair", "--generator", "test:j1",
                 "--environments", "2")
    return run_dir


def test_clearly_better_model(good_vs_meh: Path) -> None:
    """Each task's difference is that of the task means in summary.json (the run's probability-weighted
    scores: the judge's 5 and 1 weighted by its log-probabilities, not the whole numbers)."""
    result = compare_runs(good_vs_meh, good_vs_meh, model_a="test:meh", model_b="test:good")
    store = RunStore(good_vs_meh, readonly=True)
    questions = store.records("question")
    store.close()
    summary = json.loads((good_vs_meh / "summary.json").read_text())
    assert summary["score_kind"] == "expected" and result.score_kind == "expected"
    assert result.shared == len(questions) >= 15 and result.only_a == result.only_b == 0
    assert len(result.tasks) == 5
    p_values = []
    for task in result.tasks:
        means = [summary["models"][m]["tasks"][task.task]["mean"] for m in ("test:meh", "test:good")]
        assert task.n == sum(q["task"] == task.task for q in questions)
        assert (task.mean_a, task.mean_b) == (pytest.approx(means[0]), pytest.approx(means[1]))
        assert task.diff == pytest.approx(means[1] - means[0]) and 3 < task.diff < 4 and task.wins_b == task.n
        if task.n >= 2:
            assert (task.ci_low, task.ci_high) == (pytest.approx(task.diff), pytest.approx(task.diff))
        assert task.p_value == pytest.approx(min(1.0, 2 / 2**task.n))  # exact: every difference positive
        p_values.append(task.p_value)
    assert [t.p_holm for t in result.tasks] == holm(p_values)
    assert result.overall.task == ALL and result.overall.n == result.shared
    assert result.overall.p_value < 1e-6 and verdict(result.overall) == "B better"
    swapped = compare_runs(good_vs_meh, good_vs_meh, model_a="test:good", model_b="test:meh")
    assert swapped.overall.diff == pytest.approx(-result.overall.diff) and verdict(swapped.overall) == "A better"


def test_two_runs_on_the_same_questions(eval_run: Path, eval_run_b: Path) -> None:
    result = compare_runs(eval_run, eval_run_b, model_a="test:a")
    assert result.model_a == "test:a" and result.model_b == "test:b"
    assert result.judges == ["test:j1", "test:xssjudge"]
    assert result.shared > 0 and result.only_a == 0 and result.only_b == 0
    total = sum(t.n for t in result.tasks)
    assert total == result.shared == result.overall.n
    for task in result.tasks:
        assert task.mean_b - task.mean_a == pytest.approx(task.diff)
        if task.ci_low is not None:
            assert task.ci_low <= task.diff + 1e-9 and task.diff - 1e-9 <= task.ci_high
        assert task.p_value is None or 0 <= task.p_value <= 1


def test_paired_difference_matches_scipy() -> None:
    rng = np.random.default_rng(1)
    a = rng.integers(1, 6, 25).astype(float)
    b = np.clip(a + rng.integers(-1, 3, 25), 1, 5)
    result = paired_difference("t", list(a), list(b), seed=0)
    expected = stats.wilcoxon(b - a)
    assert result.p_value == pytest.approx(expected.pvalue)
    assert result.diff == pytest.approx(float(np.mean(b - a)))
    assert result.ci_low < result.diff < result.ci_high
    assert result.wins_b + result.wins_a + result.ties == 25
    same = paired_difference("t", [3, 4, 5], [3, 4, 5])
    assert same.diff == 0 and same.p_value == 1.0 and same.ci_low == same.ci_high == 0
    one = paired_difference("t", [2], [4])
    assert one.n == 1 and one.ci_low is None and verdict(one) == "too few questions"


def test_holm() -> None:
    assert holm([0.01, 0.04, None, 0.03]) == [pytest.approx(0.03), pytest.approx(0.06), None, pytest.approx(0.06)]


def test_model_choice_errors(eval_run: Path, eval_run_b: Path, good_vs_meh: Path) -> None:
    auto = compare_runs(eval_run, eval_run)  # one run with two models: A and B in the summary's order
    assert (auto.model_a, auto.model_b) == ("test:a", "test:xss")
    with pytest.raises(PersonagraphError, match="choose with --model-a and --model-b"):
        compare_runs(eval_run, eval_run_b)  # A has two models: which one?
    with pytest.raises(PersonagraphError, match="--model-b test:nope: not in"):
        compare_runs(eval_run, eval_run_b, model_a="test:a", model_b="test:nope")
    with pytest.raises(PersonagraphError, match="no question scored in both"):
        compare_runs(eval_run, good_vs_meh, model_a="test:a", model_b="test:good")
    with pytest.raises(PersonagraphError, match="nothing to compare"):
        compare_runs(eval_run, eval_run, model_a="test:a", model_b="test:a")


def test_comparison_exports(good_vs_meh: Path) -> None:
    result = compare_runs(good_vs_meh, good_vs_meh, model_a="test:meh", model_b="test:good")
    csv_text = export([result.table()], "csv")
    assert csv_text.splitlines()[0].startswith("task,shared questions,A,B,B − A")
    assert len(csv_text.splitlines()) == 1 + 5 + 1
    markdown = export([result.table()], "markdown")
    overall = result.overall
    assert (f"| all tasks | {result.shared} | {overall.mean_a:.2f} | {overall.mean_b:.2f} | {overall.diff:.2f} |"
            in markdown)
    assert "probability-weighted verdicts (test:fair)" in markdown


def test_one_score_kind_in_summary_view_report_and_compare(good_vs_meh: Path) -> None:
    """With judges that return log-probabilities, summary.json, `view`, the HTML report and `compare` show
    the same probability-weighted numbers: compare's A and B over every question are the models' mean item
    scores, the PersonaScores' own inputs."""
    from typer.testing import CliRunner

    from personagraph.cli import app
    from personagraph.report import build_report, load_run
    from personagraph.report.evaldata import items

    summary = json.loads((good_vs_meh / "summary.json").read_text())
    assert summary["score_kind"] == "expected"
    shown = CliRunner().invoke(app, ["view", str(good_vs_meh)], env={"COLUMNS": "120"})
    compared = CliRunner().invoke(app, ["compare", str(good_vs_meh), str(good_vs_meh), "--model-a", "test:meh",
                                        "--model-b", "test:good"], env={"COLUMNS": "120"})
    assert shown.exit_code == compared.exit_code == 0, shown.output + compared.output
    page = build_report([load_run(good_vs_meh)])
    result = compare_runs(good_vs_meh, good_vs_meh, model_a="test:meh", model_b="test:good")
    for model, mean in (("test:meh", result.overall.mean_a), ("test:good", result.overall.mean_b)):
        scored = [i["score"] for i in items(load_run(good_vs_meh)) if i["model"] == model]
        assert mean == pytest.approx(float(np.mean(scored)))
        persona_score = summary["models"][model]["persona_score"]
        assert f"{persona_score:.2f}" in shown.stdout and f"{persona_score:.2f}" in page
        for task in result.tasks:
            task_mean = summary["models"][model]["tasks"][task.task]["mean"]
            assert f"{task_mean:.2f}" in shown.stdout and f"{task_mean:.2f}" in page
            assert f"{task_mean:.2f}" in compared.stdout
    assert "probability-weighted" in compared.stdout


def test_the_pytest_message_shows_the_runs_probability_weighted_scores(tmp_path: Path) -> None:
    """A failing `assert_persona` with logprob judges quotes the PersonaScore and item scores of its run's
    summary.json (probability-weighted), as view and compare show them."""
    from personagraph.testing import PersonaAssertionError, PersonaTester

    with pytest.raises(PersonaAssertionError) as failed:
        PersonaTester("score-kind", tmp_path).assert_persona("test:meh", "A sailor", judges=["test:fair"],
                                                             generator="test:j1", min_score=5.0)
    (summary_file,) = tmp_path.glob(".personagraph/**/summary.json")
    summary = json.loads(summary_file.read_text())
    assert summary["score_kind"] == "expected"
    score = summary["models"]["test:meh"]["persona_score"]
    message = str(failed.value)
    assert f"PersonaScore {score:.2f} < 5.0" in message and score != round(score)
    quoted = re.findall(r"\] (\d\.\d\d)  Q:", message)
    assert quoted and all(float(s) != 1.0 for s in quoted)  # weighted, not the whole-number verdict 1
