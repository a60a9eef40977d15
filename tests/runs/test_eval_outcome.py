"""Outcome accounting of eval runs: failures are listed, never finished, and retried on resume."""

from __future__ import annotations

import itertools
import json
import os
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console

from bench.fake_openai import start_in_thread
from personagraph.models import ModelSettings
from personagraph.models.testing import register_script
from personagraph.report.html import build_report
from personagraph.report.load import load_run
from personagraph.report.view import render_summary
from personagraph.runs.base import EXIT_INCOMPLETE, ProgressEvent
from personagraph.runs.eval import EvalConfig, build_summary
from personagraph.runs.eval import run as run_eval
from personagraph.schemas import Persona
from personagraph.store import RunStore
from tests.runs.switch import switch_model

COWBOY = Persona(description="A 70-year-old retired cowboy from Texas")
NURSE = Persona(description="A pediatric nurse from Ohio")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _config(**overrides) -> EvalConfig:
    base = dict(personas=[COWBOY, NURSE], models=["openai:agent"], judges=["openai:judge"], environments=2,
                questions_per_task=1, concurrency=4)
    return EvalConfig(**{**base, **overrides})


async def test_an_eval_through_an_outage_finishes_every_item_after_one_rerun(run_dir: Path) -> None:
    with start_in_thread(delay=0.01, outage_status=503) as server:
        settings = ModelSettings(base_url=server.base_url, api_key="sk-test", retry_attempts=1)

        def outage_once_answering(event: ProgressEvent) -> None:  # the server goes down mid-run
            if event.stage == "answers" and event.done == 2:
                server.start_outage(600)

        first = await run_eval(_config(), run_dir, settings=settings, on_progress=outage_once_answering)
        assert first.failures and first.exit_code == EXIT_INCOMPLETE
        assert {f.stage for f in first.failures} >= {"answers"}
        assert all(f.model and "HTTP 503" in f.reason for f in first.failures)
        assert first.personas_finished < 2
        page = build_report([load_run(run_dir)])  # the outcome beside the scores, and every failed item
        assert f": {len(first.failures)} failed items" in page and f"{len(first.failures)} failed item(s)" in page
        server.start_outage(0)
        server.reset()
        second = await run_eval(_config(), run_dir, settings=settings)
        stats = server.stats()
        assert second.failures == [] and second.incomplete == 0 and second.exit_code == 0
        assert second.personas_finished == 2
        assert second.retried == len(first.failures) and second.recovered == second.retried
        # only calls that had not succeeded were sent: no request body twice, no cached call again
        assert all(n == 1 for n in stats.attempts.values()) and stats.completions == second.llm_calls
        assert second.cache_hits > 0
        third = await run_eval(_config(), run_dir, settings=settings)
        assert third.llm_calls == 0 and third.retried == 0 and third.exit_code == 0


async def test_no_retry_keeps_failed_items_failed(run_dir: Path) -> None:
    with start_in_thread(outage=600, outage_status=401) as server:
        settings = ModelSettings(base_url=server.base_url, api_key="sk-test")
        first = await run_eval(_config(personas=[COWBOY]), run_dir, settings=settings)
        assert [(f.stage, f.item) for f in first.failures] == [("select", COWBOY.id)]
        server.start_outage(0)
        kept = await run_eval(_config(personas=[COWBOY], retry_failed=False), run_dir, settings=settings)
        assert kept.llm_calls == 0 and kept.failures == first.failures and kept.retried == 0
        assert server.stats().completions == 0
        retried = await run_eval(_config(personas=[COWBOY]), run_dir, settings=settings)
        assert retried.failures == [] and retried.retried == retried.recovered == 1


def _eval(run_dir: Path, base_url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "personagraph.cli", "eval", "--persona", COWBOY.description, "-m", "openai:agent",
         "-j", "openai:judge", "--environments", "1", "--questions-per-task", "1", "--base-url", base_url,
         "--api-key", "sk-test", "--run-dir", str(run_dir), *extra],
        capture_output=True, text=True, timeout=300, env={**os.environ, "NO_COLOR": "1", "COLUMNS": "200"},
    )


def test_an_unreachable_endpoint_is_not_a_success_and_recovers_on_rerun(run_dir: Path) -> None:
    port = _free_port()
    down = _eval(run_dir, f"http://127.0.0.1:{port}/v1")
    assert down.returncode == EXIT_INCOMPLETE, down.stderr
    assert "1 failed items" in down.stderr and "run the same command again" in down.stderr
    summary = RunStore(run_dir, readonly=True)
    assert summary.get("selection", COWBOY.id)["status"] == "failed"
    failures = json.loads((run_dir / "summary.json").read_text())["failures"]
    assert [(f["stage"], f["model"]) for f in failures] == [("select", "openai:judge")]
    assert "ConnectError" in failures[0]["reason"] or "connect" in failures[0]["reason"].lower()
    with start_in_thread(port=port) as server:
        up = _eval(run_dir, server.base_url)
        assert up.returncode == 0, up.stderr
        assert "retried: 1, recovered: 1" in up.stderr and "personas finished: 1/1" in up.stdout
        assert all(n == 1 for n in server.stats().attempts.values())


def test_two_evals_on_one_run_dir_the_second_is_refused(run_dir: Path) -> None:
    with start_in_thread(rate_timeout=1.0, timeout_sleep=120) as server:  # the first eval waits on its calls
        first = subprocess.Popen(
            [sys.executable, "-m", "personagraph.cli", "eval", "--persona", COWBOY.description, "-m", "openai:agent",
             "-j", "openai:judge", "--base-url", server.base_url, "--api-key", "sk-test", "--run-dir", str(run_dir)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )
        try:
            deadline = time.monotonic() + 60
            while not (run_dir / "run.lock").is_file() or not (run_dir / "run.lock").read_text():
                assert time.monotonic() < deadline and first.poll() is None
                time.sleep(0.05)
            second = _eval(run_dir, server.base_url)
            assert second.returncode == 2
            assert second.stderr.strip().splitlines() == [
                f"error: {run_dir}: in use by process {first.pid} on {socket.gethostname()}; wait for it to "
                "finish or use another --run-dir"
            ]
        finally:
            first.terminate()
            first.wait(30)


async def test_twenty_questions_per_task_or_a_recorded_shortfall(run_dir: Path) -> None:
    config = EvalConfig(personas=[COWBOY], models=["test:agent"], judges=["test:judge"], generator="test:gen",
                        environments=2, questions_per_task=20)
    summary = await run_eval(config, run_dir)
    store = RunStore(run_dir, readonly=True)
    short = {s["item"]: s for s in summary.shortfalls}
    for batch in store.records("question_batch"):
        asked = [q for q in store.records("question") if q["task"] == batch["task"]]
        assert len(asked) == 20 - batch["shortfall"]  # the count, or what is missing is on record
        if batch["shortfall"]:
            assert short[f"{COWBOY.id}/{batch['task']}"]["got"] == len(asked)
    assert sum(b["extra_calls"] for b in store.records("question_batch")) > 0  # the test generator lists 1..n
    total = len(store.records("question"))
    assert total >= 0.9 * 100 and summary.roles["question_gen"]["calls"] <= 5 * 4  # bounded top-ups


DELETED = [  # (record kind, which row): a user deletes one row of a finished unit
    ("selection", "rowid=(SELECT min(rowid) FROM records WHERE kind='selection')"),
    ("question_batch", "rowid=(SELECT min(rowid) FROM records WHERE kind='question_batch')"),
    ("question", "rowid=(SELECT max(rowid) FROM records WHERE kind='question')"),
    ("exemplars", "rowid=(SELECT min(rowid) FROM records WHERE kind='exemplars')"),
    ("answer", "rowid=(SELECT min(rowid) FROM records WHERE kind='answer')"),
    ("verdict", "rowid=(SELECT max(rowid) FROM records WHERE kind='verdict')"),
    ("item_score", "rowid=(SELECT min(rowid) FROM records WHERE kind='item_score')"),
]


def _records(run_dir: Path) -> list[tuple[str, str, str]]:
    db = sqlite3.connect(run_dir / "run.sqlite")
    try:
        return sorted(db.execute("SELECT kind, id, data FROM records WHERE kind NOT LIKE 'unit_%'"))
    finally:
        db.close()


@pytest.mark.parametrize("kind, where", DELETED, ids=[kind for kind, _ in DELETED])
async def test_a_deleted_record_of_a_finished_unit_is_incomplete_and_redone_from_the_cache(
    run_dir: Path, kind: str, where: str
) -> None:
    config = _config(personas=[COWBOY], models=["test:agent"], judges=["test:judge"], generator="test:gen")
    first = await run_eval(config, run_dir)
    assert first.exit_code == 0 and first.personas_finished == 1
    rows = _records(run_dir)
    db = sqlite3.connect(run_dir / "run.sqlite")
    deleted = db.execute(f"SELECT id FROM records WHERE kind=? AND {where}", (kind,)).fetchone()
    db.execute(f"DELETE FROM records WHERE kind=? AND {where}", (kind,))
    db.commit()
    db.close()
    store = RunStore(run_dir, readonly=True)  # the report's view: the hole is counted, not dropped
    seen = build_summary(store, config)
    store.close()
    assert seen.incomplete == 1 and seen.personas_finished == 0 and seen.exit_code == EXIT_INCOMPLETE, deleted
    again = await run_eval(config, run_dir)
    assert again.incomplete == 0 and again.exit_code == 0 and again.personas_finished == 1
    assert again.llm_calls == 0 and again.cache_hits > 0  # the redo repeats no successful call
    assert _records(run_dir) == rows  # the same row is back (same data), every other one unchanged
    assert again.models == first.models


async def test_a_stored_unusable_reply_is_a_permanent_failure_and_not_retried(run_dir: Path) -> None:
    """A verdict whose reply never parses is stored with the call: every re-run gets the same reply, so it is
    listed as permanent and not retried; a verdict whose endpoint was down is retried and recovered."""
    judge = switch_model("perm-judge", down=lambda text: "Linguistic" in text,
                         answer=lambda text: "I do not write JSON." if "Toxicity" in text else None)
    config = _config(personas=[COWBOY], models=["test:agent"], judges=[judge.spec], generator="test:gen")
    first = await run_eval(config, run_dir)
    permanent = [f for f in first.failures if f.permanent]
    assert len(permanent) == 1 and permanent[0].stage == "verdicts"
    assert permanent[0].reason.startswith("invalid structured output")
    assert len(first.failures) == 2 and "is down" in next(f for f in first.failures if not f.permanent).reason
    line = first.outcome_line() or ""
    assert "; 1 permanent (the model's stored reply is unusable: not retried); run the same command again" in line
    judge.up()
    second = await run_eval(config, run_dir)
    assert second.retried == second.recovered == 1  # the one that could change
    assert second.failures == permanent and second.exit_code == EXIT_INCOMPLETE
    assert "run the same command again" not in (second.outcome_line() or "")
    written = json.loads((run_dir / "summary.json").read_text())["failures"]
    assert [f["permanent"] for f in written] == [True]
    third = await run_eval(config, run_dir)
    assert third.llm_calls == 0 and third.retried == 0 and third.failures == permanent


def test_the_quick_preset_fills_only_what_was_not_given() -> None:
    quick = EvalConfig(personas=["A nurse"], judges=["test:j1", "test:j2"], quick=True)
    preset = (quick.environments, quick.questions_per_task, quick.shortlist, quick.max_answer_tokens,
              quick.brief_answers)
    assert preset == (3, 1, 20, 128, True)
    assert quick.judges == ["test:j1"]
    given = EvalConfig(personas=["A nurse"], quick=True, max_answer_tokens=512, environments=2,
                       brief_answers=False)
    assert (given.max_answer_tokens, given.environments, given.brief_answers) == (512, 2, False)
    full = EvalConfig(personas=["A nurse"])  # not quick: the full defaults
    assert (full.max_answer_tokens, full.brief_answers) == (256, False)


async def test_brief_answers_ask_the_model_agents_for_two_or_three_sentences(run_dir: Path) -> None:
    """With ``brief_answers`` (the quick preset) every answer call of a model agent asks for a short reply, so
    answers end within the preset's token cap; without it the agent sees PersonaGym's prompt unchanged."""
    systems: list[str] = []

    def agent(messages: list[dict], schema: dict | None) -> str:
        systems.append(messages[0]["content"])
        return "I would saddle up."

    register_script("brief-agent", agent)
    for brief in (True, False):
        config = _config(personas=[COWBOY], models=["test:brief-agent"], judges=["test:judge"],
                         generator="test:gen", brief_answers=brief)
        summary = await run_eval(config, run_dir / str(brief))
        assert summary.exit_code == 0
    asked, plain = systems[:len(systems) // 2], systems[len(systems) // 2:]
    assert asked and all(s.endswith("persona. Reply in two or three short sentences.") for s in asked)
    assert plain and all(s.endswith("abilities of this persona.") for s in plain)


async def test_answers_that_used_the_whole_answer_budget_are_counted_and_shown(run_dir: Path) -> None:
    """An answer the token limit stopped is judged as it stands; the summary, the terminal table and the
    report say how many there were, so a low score is not read as the agent's whole answer."""
    answered = itertools.count()

    def agent(messages: list[dict], schema: dict | None) -> str:  # the first two answers ramble on
        rambling = "I rode the range for forty years and " * (10 if next(answered) < 2 else 0)
        return rambling + "I would saddle up."

    register_script("rambling-agent", agent)
    config = _config(personas=[COWBOY], models=["test:rambling-agent"], judges=["test:judge"],
                     generator="test:gen", max_answer_tokens=16)
    summary = await run_eval(config, run_dir)
    answers = RunStore(run_dir, readonly=True).records("answer")
    cut = [a for a in answers if a["at_token_limit"]]
    assert 0 < len(cut) < len(answers)
    assert summary.models["test:rambling-agent"]["answers_at_token_limit"] == len(cut)
    console = Console(width=120, record=True)
    console.print(render_summary(json.loads((run_dir / "summary.json").read_text())))
    row = next(line for line in console.export_text().splitlines() if "cut at token limit" in line)
    assert row.split("│")[2].strip() == f"{len(cut)}/{len(answers)}"
    assert "cut at token limit" in build_report([load_run(run_dir)])
