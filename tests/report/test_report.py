"""The HTML report of an eval run: numbers present, untrusted text escaped, no API key, self-contained."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest
from report_helpers import IMG, PERSONAS, PLANTED_ENV_KEY, PLANTED_FLAG_KEY, SCRIPT

from personagraph.api import evaluate
from personagraph.errors import PersonagraphError
from personagraph.redact import REDACTED, redact_text, scrub
from personagraph.report import build_report, load_run, load_runs, write_report
from personagraph.report.cost import cost_of, price_of
from personagraph.runs.eval import EvalConfig, build_summary
from personagraph.schemas import TASK_NAMES
from personagraph.store import RunStore


@pytest.fixture(scope="module")
def report(eval_run: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("report") / "report.html"
    write_report([eval_run], out)
    return out.read_text(encoding="utf-8")


def test_headline_numbers_are_in_the_report(report: str, eval_run: Path) -> None:
    summary = json.loads((eval_run / "summary.json").read_text())
    assert set(summary["models"]) == {"test:a", "test:xss"}
    for model, result in summary["models"].items():
        assert html.escape(model) in report
        assert f"{result['persona_score']:.2f}" in report
        low, high = result["ci"]
        assert f"{low:.2f}–{high:.2f}" in report
        for task, stats in result["tasks"].items():
            assert f"{stats['mean']:.2f}" in report, (model, task)
    for task in TASK_NAMES:
        assert task in report
    alpha = summary["judge_agreement"]["krippendorff_alpha_ordinal"]
    assert f"{alpha:.3f}" in report
    for section in ("Headline", "Task profile (radar)", "Score distributions", "Lowest-scored items",
                    "Tokens, cost and time", "Run configuration"):
        assert section in report


def test_model_output_is_escaped(report: str) -> None:
    assert SCRIPT not in report
    assert html.escape(SCRIPT) in report  # the answer, shown as text
    body = report.split("</head>", 1)[1]  # the head holds the plotly library, which has such strings in code
    assert IMG not in report and "<img" not in body and "onerror=" not in body.replace("onerror=&quot;", "")
    assert html.escape(IMG) in report  # the judge's rationale
    assert "<b>bold</b>" not in report  # the persona is user input
    assert html.escape(PERSONAS[1]) in report
    # every script element is ours: the plotly library in the head, one plot call per chart in the body
    head = report.split("</head>", 1)[0]
    assert len(re.findall(r"<script\b", head)) == 1
    scripts = re.findall(r"<script\b[^>]*>\s*(.{0,40})", body)
    assert scripts and all(text.startswith("window.PLOTLYENV") for text in scripts)
    assert len(scripts) == body.count('<div class="chart">')


def test_no_api_key_in_report_or_run_dir(report: str, eval_run: Path) -> None:
    for key in (PLANTED_FLAG_KEY, PLANTED_ENV_KEY):
        assert key not in report
        for path in eval_run.rglob("*"):
            if path.is_file():
                assert key.encode() not in path.read_bytes(), path


def test_report_is_self_contained(report: str) -> None:
    assert report.count("<script") >= 2
    assert len(re.findall(r"plotly\.js v\d", report)) == 1  # the library is inlined exactly once
    assert not re.search(r"<(script|link|img|iframe|source)\b[^>]*\b(src|href)\s*=", report)
    assert "@import" not in report


def test_sections_without_data_are_left_out(report: str) -> None:
    for absent in ("Sessions: drift", "Memory retrieval", "PersoBench"):
        assert absent not in report


def test_lowest_items_show_question_answer_and_every_rationale(eval_run: Path) -> None:
    run = load_run(eval_run)
    from personagraph.report.evaldata import items

    rows = [i for i in items(run) if i["score"] is not None]
    lowest = min(rows, key=lambda i: i["score"])
    page = build_report([run], lowest=3)
    block = page.split("Lowest-scored items", 1)[1]
    assert html.escape(lowest["question"]) in block
    for verdict in lowest["verdicts"]:
        assert html.escape(verdict["rationale"]) in block
    assert block.count('<div class="item">') >= 3


def test_lowest_items_list_each_models_own(eval_run: Path) -> None:
    """Each model gets its own lowest items, not only the model whose items score lowest overall."""
    run = load_run(eval_run)
    from personagraph.report.evaldata import items

    block = build_report([run], lowest=2).split("Lowest-scored items", 1)[1].split("<h3>", 1)[0]
    for model in ("test:a", "test:xss"):
        own = block.split(f"<h4>{html.escape(model)}</h4>", 1)[1].split("<h4>", 1)[0]
        cards = own.count('<div class="item">')
        assert cards == 2 and own.count(f'<span class="pill">{html.escape(model)}</span>') == cards, model
        worst = min((i for i in items(run) if i["model"] == model and i["score"] is not None),
                    key=lambda i: i["score"])
        assert f'<span class="score">{worst["score"]:.2f}</span>' in own, model


def test_two_runs_side_by_side(eval_run: Path, eval_run_b: Path) -> None:
    runs = load_runs([eval_run, eval_run_b])
    assert runs[0].name != runs[1].name  # both directories are called "run"
    page = build_report(runs)
    for run in runs:
        assert f"{html.escape(run.name)} · test:a" in page or run.name in page
    assert "test:b" in page and "test:xss" in page


def test_config_without_secrets_is_shown(report: str) -> None:
    assert "Run configuration" in report
    assert "prompt/data hash: judge" in report
    assert "version: personagraph" in report


def test_scrub_and_redact() -> None:
    data = {"api_key": "abc", "nested": {"OPENAI_API_KEY": "x", "max_tokens": 5, "auth_token": "t"},
            "base_url": "https://user:pw@example.com/v1", "note": "key sk-abcdefghijklmnopqrstuvwx here"}
    clean = scrub(data)
    assert clean["api_key"] == REDACTED and clean["nested"]["OPENAI_API_KEY"] == REDACTED
    assert clean["nested"]["auth_token"] == REDACTED and clean["nested"]["max_tokens"] == 5
    assert clean["base_url"] == f"https://{REDACTED}@example.com/v1"
    assert "sk-abc" not in clean["note"]
    assert redact_text("a secret-value-123456 b", ["secret-value-123456"]) == f"a {REDACTED} b"


def test_env_secret_is_redacted_from_report(eval_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = load_run(eval_run)
    planted = "leaky-value-8f7e6d5c4b3a"
    run.meta["config"]["note"] = planted
    monkeypatch.setenv("SOME_SERVICE_TOKEN", planted)
    assert planted not in build_report([run])


def test_prices() -> None:
    assert price_of("test:a") == (0.0, 0.0) and price_of("local:qwen2.5-coder-0.5b") == (0.0, 0.0)
    assert price_of("openai:gpt-4o-mini") == (0.15, 0.60)
    assert price_of("openai:gpt-4o-mini-2024-07-18") == (0.15, 0.60)
    assert price_of("openai:gpt-4o-2024-08-06") == (2.50, 10.00)
    assert price_of("openai:my-finetune") is None and cost_of("openai:llama3", 10, 10) is None
    assert cost_of("openai:gpt-4o-mini", 1_000_000, 1_000_000) == pytest.approx(0.75)


def test_unknown_cost_shows_a_dash(eval_run: Path) -> None:
    run = load_run(eval_run)
    run.calls = [*run.calls, {"role": "judge", "model": "openai:some-unknown-model", "calls": 3,
                              "input_tokens": 100, "output_tokens": 10, "latency_s": 1.0}]
    page = build_report([run])
    row = page.split("openai:some-unknown-model", 1)[1].split("</tr>", 1)[0]
    assert row.rstrip().endswith("<td class=\"num\">—</td>")
    assert "+ unknown" in page


@pytest.mark.parametrize("setup, message", [
    (lambda p: None, "no such run directory"),
    (lambda p: p.mkdir(), "not a run directory"),
    (lambda p: p.write_text("x"), "not a directory"),
    (lambda p: (p.mkdir(), (p / "run.sqlite").write_bytes(b"garbage" * 200)), "unreadable"),
])
def test_bad_input_is_one_line_error(tmp_path: Path, setup, message: str) -> None:
    path = tmp_path / "bad"
    setup(path)
    with pytest.raises(PersonagraphError, match=message) as error:
        write_report([path], tmp_path / "out.html")
    assert "\n" not in str(error.value)
    assert not (tmp_path / "out.html").exists()


def test_truncated_store_and_bad_summary(eval_run: Path, tmp_path: Path) -> None:
    broken = tmp_path / "truncated"
    broken.mkdir()
    data = (eval_run / "run.sqlite").read_bytes()
    (broken / "run.sqlite").write_bytes(data[: len(data) // 3])
    with pytest.raises(PersonagraphError):
        load_run(broken)
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "run.sqlite").write_bytes(data)
    (copy / "summary.json").write_text("{not json")
    with pytest.raises(PersonagraphError, match="summary.json: not valid JSON"):
        load_run(copy)


def test_permanent_failures_are_not_promised_a_retry(tmp_path: Path) -> None:
    """A verdict that never parses comes back identical on a re-run: the report says so per item."""
    run_dir = tmp_path / "run"
    summary = evaluate(PERSONAS[0], models=["test:a"], judges=["test:broken"], generator="test:gen",
                       environments=2, questions_per_task=1, run_dir=run_dir)
    assert summary.failures and all(f.permanent for f in summary.failures)
    out = tmp_path / "report.html"
    write_report([run_dir], out)
    page = html.unescape(out.read_text(encoding="utf-8"))
    assert f"{len(summary.failures)} permanent: the model's stored reply is unusable, not retried" in page
    assert "re-running cannot change them" in page and "retries them" not in page
    assert page.count("no (permanent)") == len(summary.failures)


def test_the_report_shows_the_scores_of_summary_json(tmp_path: Path) -> None:
    """One score kind everywhere: the per-model and per-persona PersonaScores of the report are those of
    summary.json (each persona's as summary.json has it for a run of that persona alone); the samples of a
    question are labelled; the generator that ran is named."""
    summary = evaluate(list(PERSONAS), models=["test:a"], judges=["test:j1", "test:j2"], environments=1,
                       questions_per_task=1, samples=2, run_dir=tmp_path / "run")
    assert summary.score_kind == "expected"  # expected scores differ from a mean of integer verdicts
    run = load_run(tmp_path / "run")
    page = build_report([run], lowest=100)
    assert f"{summary.models['test:a']['persona_score']:.2f}" in page.split("Task profile", 1)[0]
    per_persona = page.split("PersonaScore per persona", 1)[1].split("</table>", 1)[0]
    config = EvalConfig.model_validate(run.config)
    store = RunStore(tmp_path / "run", readonly=True, lock=False)
    try:
        for persona in config.personas:
            alone = build_summary(store, config.model_copy(update={"personas": [persona]}))
            row = per_persona.split(html.escape(persona.description), 1)[1].split("</tr>", 1)[0]
            assert f"{alone.models['test:a']['persona_score']:.2f}" in row, persona
    finally:
        store.close()
    lowest = page.split("Lowest-scored items", 1)[1]
    assert "sample 1/2" in lowest and "sample 2/2" in lowest
    assert "test:j1 (the first judge)" in page.split("Run configuration", 1)[1]
