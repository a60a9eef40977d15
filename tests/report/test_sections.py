"""Sections of the other run kinds render when their data exists (and only then): sessions, memory, metrics."""

from __future__ import annotations

import csv
import html
import io
import json
from pathlib import Path

from report_helpers import SCRIPT
from rich.console import Console

from personagraph.report import build_report, export, headline_tables, load_run, load_runs
from personagraph.report.view import view
from personagraph.store import RunStore


def charts_in(page: str) -> int:
    return page.count('<div class="chart">')


def rendered(renderable) -> str:
    console = Console(width=160, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


def test_session_report(session_run: Path) -> None:
    run = load_run(session_run)
    assert run.kind == "simulate"
    page = build_report([run])
    for text in ("Sessions by agent", "Sessions: drift and break points", "first break", "refusal_marker",
                 "transcript:", "break rate"):
        assert text in page, text
    assert charts_in(page) == 1  # the drift lines (with break markers)
    assert "Task profile" not in page and "Lowest-scored items" not in page and "Memory retrieval" not in page
    assert SCRIPT not in page and html.escape(SCRIPT) in page  # agent turns are model output too
    summary = json.loads((session_run / "summary.json").read_text())
    assert f"{summary['sessions'][0]['mean_score']:.2f}" in page
    rows = list(csv.DictReader(io.StringIO(export(headline_tables([run]), "csv"))))
    by_agent = {(r["agent"], r["mode"]): r for r in rows}
    assert set(by_agent) == {("test:refuser", "adversarial"), ("test:xss", "normal")}
    assert float(by_agent[("test:refuser", "adversarial")]["break rate"]) == 1.0
    assert by_agent[("test:refuser", "adversarial")]["sessions"] == "2"
    text = rendered(view(run))
    assert "Sessions by agent" in text and "break rate" in text and "test:refuser · adversarial" in text


def test_adversarial_sessions_show_levels(session_run: Path, tmp_path: Path) -> None:
    run = load_run(session_run)
    run.records["session"] = [r for r in run.records["session"] if r.get("adversarial")]
    page = build_report([run])
    assert "level 1" in page and "level 3" in page  # escalation bands behind the drift lines
    assert page.count("break at turn") >= 1  # hover text of the break markers


def test_a_session_turn_cut_at_the_token_limit_is_marked_in_the_report(session_run: Path) -> None:
    run = load_run(session_run)
    assert "cut at token limit" not in build_report([run])
    turn = next(t for t in run.records["session"][0]["turns"] if t["role"] == "assistant")
    turn["at_token_limit"] = True
    assert build_report([run]).count("cut at token limit") == 1


def test_memory_report(memory_run: Path) -> None:
    run = load_run(memory_run)
    page = build_report([run])
    assert "Memory retrieval" in page and "Memory retrieval over k" in page
    assert charts_in(page) == 1
    tables = headline_tables([run])
    assert [t.title for t in tables] == ["Memory retrieval"]
    rows = {r["method"]: r for r in tables[0].rows}
    assert rows["dense"]["MRR@10"] == 60.0 and rows["bm25"]["Recall@1"] == 28.6
    assert [c.key for c in tables[0].columns] == ["method", "queries", "MRR@10", "Recall@10", "nDCG@10"]
    assert "Sessions" not in page and "Task profile" not in page


def test_memory_dialogue_report(madial_run: Path) -> None:
    run = load_run(madial_run)
    assert run.kind == "memory-dialogue" and run.config["model"] == "test:m"
    page = build_report([run])
    assert "Memory dialogue (MADial)" in page and "Lowest-scored replies" in page and charts_in(page) == 1
    assert SCRIPT not in page and html.escape(SCRIPT) in page
    assert page.index("why naturalness") < page.index("Nice to see you")  # the lowest reply comes first
    row = headline_tables([run])[0].rows[0]
    assert row["setting"] == 2 and row["naturalness"] == 1.5 and row["intimacy_win_rate"] == 0.5
    assert "1.50" in page and "50%" in page


def test_persobench_report(persobench_run: Path) -> None:
    run = load_run(persobench_run)
    page = build_report([run])
    assert "PersoBench: metrics" in page and charts_in(page) == 1
    table = headline_tables([run])[0]
    assert [(r["model"], r["mode"]) for r in table.rows] == [("test:a", "vanilla"), ("test:a", "cot")]
    stored = RunStore(persobench_run, readonly=True)
    summary = stored.get_meta("summary:test:a|vanilla")
    stored.close()
    assert table.rows[0]["dist1"] == summary["scores"]["means"]["dist1"]
    assert table.rows[0]["failure_ratio"] == summary["cost"]["failure_ratio"]
    assert f"{summary['scores']['means']['dist1']:.3f}" in page
    markdown = export([table], "markdown")
    assert "| test:a | vanilla |" in markdown and "| test:a | cot |" in markdown


def test_longlamp_curves_over_k(longlamp_run: Path) -> None:
    run = load_run(longlamp_run)
    page = build_report([run])
    assert "LongLaMP: metrics" in page and "Metrics over k" in page
    assert charts_in(page) == 1  # the curves over k (bars only when k does not vary)
    assert len(headline_tables([run])[0].rows) == 6


def test_behavior_report(behavior_run: Path) -> None:
    run = load_run(behavior_run)
    page = build_report([run])
    assert "Behavior alignment" in page and "0.410" in page and "0.550" in page
    row = headline_tables([run])[0].rows[0]
    assert (row["kappa_low"], row["kappa_high"], row["ba_low"]) == (0.2, 0.6, 0.4)
    assert "Strategy labels" in page and charts_in(page) == 1


def test_everything_in_one_report(eval_run: Path, session_run: Path, memory_run: Path, persobench_run: Path,
                                  behavior_run: Path, longlamp_run: Path) -> None:
    runs = load_runs([eval_run, session_run, memory_run, persobench_run, behavior_run, longlamp_run])
    page = build_report(runs)
    titles = [t.title for t in headline_tables(runs)]
    assert titles == ["PersonaScore (1–5) by model and task", "Sessions by agent", "PersoBench: metrics",
                      "LongLaMP: metrics", "Behavior alignment", "Memory retrieval"]
    persobench = headline_tables(runs)[2]
    assert [c.key for c in persobench.columns][:3] == ["run", "model", "mode"]
    assert "retriever" not in [c.key for c in persobench.columns]
    for title in titles:
        assert html.escape(title) in page
    assert page.count("plotly.js v") == 1  # the library once, however many charts
    assert charts_in(page) >= 8


def test_a_run_without_scores_still_renders(tmp_path: Path) -> None:
    run_dir = tmp_path / "empty"
    store = RunStore(run_dir)
    store.set_meta("kind", "meta-eval")
    store.set_meta("config", {"judges": ["test:j1"], "api_key": "should-not-show-123"})
    store.close()
    page = build_report([load_run(run_dir)])
    assert "Run configuration" in page and "meta-eval" in page
    assert "should-not-show-123" not in page and "[redacted]" in page
    assert charts_in(page) == 0 and "plotly.js v" not in page  # no chart, no library
    assert "no scores to show yet" in rendered(view(load_run(run_dir)))
