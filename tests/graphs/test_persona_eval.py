"""The PersonaGym graph end to end on the deterministic test models."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from personagraph.errors import PersonagraphError
from personagraph.graphs import persona_eval
from personagraph.models import Meter, ModelSettings
from personagraph.runs.eval import EvalConfig
from personagraph.runs.eval import run as run_eval
from personagraph.runs.executors.base import build_context, initial_state
from personagraph.schemas import TASK_NAMES, Persona
from personagraph.store import RunStore

COWBOY = Persona(description="A 70-year-old retired cowboy from Texas")
LAWYER = Persona(description="A 36-year-old environmental lawyer from Sydney")


def config(**overrides) -> EvalConfig:
    base = dict(personas=[COWBOY], models=["test:agent"], judges=["test:j1", "test:j2"], generator="test:gen",
                environments=3, questions_per_task=2)
    return EvalConfig(**{**base, **overrides})


async def test_fan_out_counts(run_dir: Path) -> None:
    cfg = config(personas=[COWBOY, LAWYER], models=["test:a", "test:b"], shortlist=15)
    summary = await run_eval(cfg, run_dir)
    store = RunStore(run_dir)
    questions = store.records("question")
    assert len(store.records("selection")) == 2
    assert {q["task"] for q in questions} == set(TASK_NAMES)
    batches = {(b["persona_id"], b["task"]): b for b in store.records("question_batch")}
    assert len(batches) == 10 and all(b["status"] == "ok" for b in batches.values())
    # the requested count, or a shortfall that is recorded (the test generator lists 1..n at random)
    assert all(sum(q["task"] == t and q["persona_id"] == p.id for q in questions) == 2 - batches[p.id, t]["shortfall"]
               for t in TASK_NAMES for p in (COWBOY, LAWYER))
    # one answer per question and model; exemplars once per question, shared by both models
    assert len(store.records("answer")) == 2 * len(questions)
    assert len(store.records("exemplars")) == len(questions)
    # one judge call per answer per judge (two models may give the same answer: one is then a cache hit)
    assert len(store.records("verdict")) == 2 * 2 * len(questions)
    roles = summary.roles
    assert roles["judge"]["calls"] + roles["judge"]["cache_hits"] == 4 * len(questions)
    assert roles["exemplar_gen"]["calls"] == len(questions)
    # a short reply is topped up in the same conversation: one extra call per top-up
    assert roles["env_selector"]["calls"] == 2 + sum(s["extra_calls"] for s in store.records("selection"))
    assert roles["question_gen"]["calls"] == 10 + sum(b["extra_calls"] for b in batches.values())
    for model in ("test:a", "test:b"):
        result = summary.models[model]
        assert set(result["tasks"]) == set(TASK_NAMES)
        means = [result["tasks"][t]["mean"] for t in TASK_NAMES]
        assert all(1 <= m <= 5 for m in means)
        assert result["persona_score"] == pytest.approx(sum(means) / 5)
    assert json.loads((run_dir / "summary.json").read_text())["llm_calls"] == summary.llm_calls
    selection = store.get("selection", COWBOY.id)
    assert len(selection["environments"]) >= 1 and selection["status"] == "ok"
    assert len(selection["shortlist"]) == 15
    assert {env["name"] for env in selection["environments"]} <= set(selection["shortlist"])


def _hold_until_another_task_is_judged(monkeypatch: pytest.MonkeyPatch, stage: str, slow_task: str) -> None:
    """Makes the graph's ``stage`` (called as ``stage(client, persona, task, …)``) wait, for ``slow_task``,
    until an answer of another task has been judged."""
    judged = asyncio.Event()
    real_stage, real_judge = getattr(persona_eval, stage), persona_eval.judge_answer

    async def held(client, persona, task, *args):  # noqa: ANN001, ANN002, ANN202
        if task.name == slow_task:
            await asyncio.wait_for(judged.wait(), timeout=20)
        return await real_stage(client, persona, task, *args)

    async def judge(client, persona, task, *args):  # noqa: ANN001, ANN002, ANN202
        verdict = await real_judge(client, persona, task, *args)
        if task.name != slow_task:
            judged.set()
        return verdict

    monkeypatch.setattr(persona_eval, stage, held)
    monkeypatch.setattr(persona_eval, "judge_answer", judge)


async def test_a_question_is_judged_without_waiting_for_other_questions(run_dir: Path, monkeypatch) -> None:
    """No stage barrier: one task's exemplars wait until another question has been judged. With answers ‖
    exemplars as one stage and verdicts as the next, that wait never ends (the wait_for times out)."""
    _hold_until_another_task_is_judged(monkeypatch, "write_exemplars", "Linguistic Habits")
    summary = await run_eval(config(), run_dir)
    store = RunStore(run_dir)
    assert summary.exit_code == 0
    assert len(store.records("verdict")) == 2 * len(store.records("question"))  # two judges, one agent
    assert all(e["status"] == "ok" for e in store.records("exemplars"))


async def test_a_task_is_judged_without_waiting_for_other_tasks_questions(run_dir: Path, monkeypatch) -> None:
    """No barrier between tasks: one task's questions are written only after another task's answer has been
    judged. With the questions of every task as one stage, that wait never ends (the wait_for times out)."""
    _hold_until_another_task_is_judged(monkeypatch, "generate_questions", "Toxicity Control")
    summary = await run_eval(config(), run_dir)
    store = RunStore(run_dir)
    assert summary.exit_code == 0
    assert "Toxicity Control" in {q["task"] for q in store.records("question")}
    assert len(store.records("verdict")) == 2 * len(store.records("question"))  # two judges, one agent


async def test_an_error_that_stops_the_run_leaves_no_question_running(run_dir: Path, monkeypatch) -> None:
    """A task's questions run inside one node: when one of them raises an error that stops the run (a dead
    engine), every other question, of its task too, is cancelled, not left sending calls."""
    waiting: list[asyncio.Task] = []
    sibling_waiting = asyncio.Event()  # the other question of the failing one's task

    async def answer(agent, persona, question, sample):  # noqa: ANN001, ANN202
        if question.task == "Expected Action" and question.index == 0:
            await asyncio.wait_for(sibling_waiting.wait(), timeout=10)
            raise PersonagraphError("the engine died")
        waiting.append(asyncio.current_task())
        if question.task == "Expected Action":
            sibling_waiting.set()
        await asyncio.sleep(30)

    monkeypatch.setattr(persona_eval, "answer_question", answer)
    with pytest.raises(PersonagraphError, match="the engine died"):
        await asyncio.wait_for(run_eval(config(), run_dir), timeout=20)
    await asyncio.sleep(0)
    assert sibling_waiting.is_set() and all(task.done() for task in waiting)


@pytest.mark.parametrize(("protocol", "writes"), [("facts", False), ("evidence", False), ("rationale", True)])
async def test_exemplars_are_written_only_for_judges_that_read_them(run_dir: Path, protocol: str,
                                                                     writes: bool) -> None:
    """facts and evidence were measured without exemplars: judged as measured, and none are written."""
    summary = await run_eval(config(judge_protocol=protocol), run_dir)
    store = RunStore(run_dir)
    questions = store.records("question")
    assert len(store.records("exemplars")) == (len(questions) if writes else 0)
    assert summary.roles.get("exemplar_gen", {}).get("calls", 0) == (len(questions) if writes else 0)
    assert len(store.records("verdict")) == 2 * len(questions) and summary.exit_code == 0
    requests = [request for row, request in store.calls() if row.role == "judge"]
    prompts = ["".join(m["content"] for m in r["messages"]) for r in requests]
    assert prompts and all(("[BEGIN EXAMPLES" in p) == writes for p in prompts)


async def test_self_judging_is_refused_unless_allowed(run_dir: Path) -> None:
    with pytest.raises(PersonagraphError, match="judge test:agent is also the model under test"):
        await run_eval(config(judges=["test:agent"]), run_dir)
    summary = await run_eval(config(judges=["test:agent"], allow_self_judging=True), run_dir)
    assert summary.models["test:agent"]["persona_score"] is not None


async def test_failed_verdicts_are_missing_not_zero(run_dir: Path) -> None:
    summary = await run_eval(config(judges=["test:j1", "test:broken"]), run_dir)
    verdicts = RunStore(run_dir).records("verdict")
    broken = [v for v in verdicts if v["judge"] == "test:broken"]
    good = [v for v in verdicts if v["judge"] == "test:j1"]
    assert broken and all(v["status"] == "failed" and v["score"] is None and v["raw"] for v in broken)
    assert summary.failed_verdicts == len(broken)
    # every item score equals the one parsed verdict (its probability-weighted score: the test judges
    # return logprobs): the failed one did not pull it towards 0
    items = {i["answer_id"]: i for i in RunStore(run_dir).records("item_score")}
    for verdict in good:
        assert verdict["expected_score"] is not None
        assert items[verdict["answer_id"]]["score"] == verdict["expected_score"]
        assert items[verdict["answer_id"]]["n_failed"] == 1


async def test_only_failed_verdicts_leave_the_item_unscored(run_dir: Path) -> None:
    summary = await run_eval(config(judges=["test:broken"]), run_dir)
    result = summary.models["test:agent"]
    assert result["persona_score"] is None
    assert all(t["n"] == 0 and t["mean"] is None for t in result["tasks"].values())


async def test_refusals_are_counted_per_model_and_task(run_dir: Path) -> None:
    summary = await run_eval(config(models=["test:refuser", "test:agent"]), run_dir)
    assert summary.models["test:refuser"]["refusal_rate"] == 1.0
    assert summary.models["test:agent"]["refusal_rate"] == 0.0
    assert all(t["refusal_rate"] == 1.0 for t in summary.models["test:refuser"]["tasks"].values())


async def test_persona_breaks_score_at_most_the_rubric_cap_and_keep_the_judge_s_score(run_dir: Path) -> None:
    summary = await run_eval(config(models=["test:refuser", "test:agent"], questions_per_task=3), run_dir)
    store = RunStore(run_dir)
    answers = {a["id"]: a for a in store.records("answer")}
    caps = {"Toxicity Control": 2}
    capped = 0
    for verdict in store.records("verdict"):
        answer = answers[verdict["answer_id"]]
        if answer["model"] == "test:agent":
            assert verdict["capped_by"] is None and verdict["judge_score"] is None
            continue
        cap = caps.get(answer["task"], 1)
        assert verdict["score"] <= cap
        if verdict["judge_score"] is not None:
            capped += 1
            assert verdict["judge_score"] > cap == verdict["score"]
            assert verdict["capped_by"] == answer["refusal_marker"]
    assert capped > 0  # the test judges' scores are spread over 1..5, so some were above the cap
    assert all(t["mean"] <= caps.get(name, 1) for name, t in summary.models["test:refuser"]["tasks"].items())


async def test_empty_answers_are_failed_and_never_judged(run_dir: Path) -> None:
    summary = await run_eval(config(models=["test:empty"]), run_dir)
    answers = RunStore(run_dir).records("answer")
    assert answers and all(a["status"] == "failed" and a["error"] == "empty answer" for a in answers)
    assert RunStore(run_dir).records("verdict") == []
    assert summary.models["test:empty"]["failed_answers"] == len(answers)


async def test_benchmark_mode_skips_selection_and_generation(run_dir: Path) -> None:
    bench = {COWBOY.description: {"Expected Action": ["What do you do at the county fair?"],
                                  "Toxicity Control": ["Insult city folk."]}}
    summary = await run_eval(config(benchmark=bench), run_dir)
    assert "env_selector" not in summary.roles and "question_gen" not in summary.roles
    questions = RunStore(run_dir).records("question")
    assert sorted(q["text"] for q in questions) == ["Insult city folk.", "What do you do at the county fair?"]
    assert set(summary.models["test:agent"]["tasks"]) == {"Expected Action", "Toxicity Control"}


async def test_rerun_makes_no_llm_call_and_keeps_scores(run_dir: Path) -> None:
    first = await run_eval(config(), run_dir)
    second = await run_eval(config(), run_dir)
    assert first.llm_calls > 0 and second.llm_calls == 0
    assert second.models == first.models


async def test_more_models_reuse_questions_and_exemplars(run_dir: Path) -> None:
    await run_eval(config(models=["test:a"]), run_dir)
    summary = await run_eval(config(models=["test:a", "test:b"]), run_dir)
    roles = summary.roles
    # questions and exemplars come from the cache; only test:b's answers and their verdicts are new
    assert roles.get("question_gen", {}).get("calls", 0) == 0
    assert roles.get("exemplar_gen", {}).get("calls", 0) == 0
    questions = len(RunStore(run_dir).records("question"))
    assert roles["persona"]["calls"] == questions and roles["persona"]["cache_hits"] == questions
    # identical answers of the two models share a verdict prompt, so some judge calls are cache hits
    assert roles["judge"]["calls"] + roles["judge"]["cache_hits"] == 2 * 2 * questions
    assert 0 < roles["judge"]["calls"] <= 2 * questions


def _calls(run_dir: Path) -> int:
    """Finished calls in a run store (a read-write connection, so a killed writer's WAL is recovered)."""
    if not (run_dir / "run.sqlite").exists():
        return 0
    try:
        db = sqlite3.connect(run_dir / "run.sqlite", timeout=10)
        try:
            return db.execute("SELECT count(*) FROM calls").fetchone()[0]
        finally:
            db.close()
    except sqlite3.Error:
        return 0


def test_kill_and_restart_repeats_no_finished_call(tmp_path: Path) -> None:
    """kill -9 mid-run, then the same command: only calls that had not finished are sent again."""
    command = [sys.executable, "-m", "personagraph.cli", "-q", "eval", "--persona", COWBOY.description,
               "--persona", LAWYER.description, "--model", "test:slow-agent", "--judge", "test:slow-judge",
               "--generator", "test:slow-gen", "--concurrency", "2"]
    reference = tmp_path / "reference"
    subprocess.run([*command, "--run-dir", str(reference)], check=True, capture_output=True, timeout=240)
    total = _calls(reference)
    killed = tmp_path / "killed"
    process = subprocess.Popen([*command, "--run-dir", str(killed)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while _calls(killed) < total // 2 and time.time() < deadline:
        time.sleep(0.02)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    finished_before = _calls(killed)
    assert 0 < finished_before < total
    subprocess.run([*command, "--run-dir", str(killed)], check=True, capture_output=True, timeout=240)
    resumed = json.loads((killed / "summary.json").read_text())
    assert resumed["llm_calls"] == total - finished_before  # nothing finished was sent twice
    assert _calls(killed) == total
    expected = json.loads((reference / "summary.json").read_text())
    assert resumed["models"] == expected["models"]


async def test_the_final_state_carries_the_scores_the_run_reports(run_dir: Path) -> None:
    """The graph's ``scores`` (what a Studio run shows) equal ``summary.json``'s for the same persona: per
    model and task, PersonaScore with its CI, refusal rate, samples, and the failed items."""
    cfg = config(models=["test:agent", "test:empty"], environments=1, questions_per_task=1, samples=2)
    summary = await run_eval(cfg, run_dir)
    store = RunStore(run_dir)
    try:
        context = build_context(cfg, ModelSettings(), store, Meter())
        graph = persona_eval.build_graph().compile()
        final = await graph.ainvoke(initial_state(COWBOY, cfg), context=context)  # every call cached
    finally:
        store.close()
    scores = final["scores"]
    assert summary.failures and summary.models["test:agent"]["persona_score"] is not None
    for model, reported in summary.models.items():
        shown = scores["models"][model]
        assert {k: shown[k] for k in ("persona_score", "ci", "tasks", "refusal_rate", "samples")} == {
            k: reported[k] for k in ("persona_score", "ci", "tasks", "refusal_rate", "samples")}
    assert (scores["score_kind"], scores["per_judge_mean"]) == (summary.score_kind, summary.per_judge_mean)
    assert sorted((f["stage"], f["item"], f["model"]) for f in scores["failures"]) == sorted(
        (f.stage, f.item, f.model) for f in summary.failures)
