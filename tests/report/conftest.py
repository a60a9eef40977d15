"""Run directories for the report tests, made once per session with the deterministic test models.

``eval_run`` is a real ``personagraph eval`` run (through the CLI, with an API key given by flag and by
environment) whose agent ``test:xss`` answers with a planted ``<script>`` and whose judge ``test:xssjudge``
writes a planted ``<img onerror>`` rationale. The synthetic runs (session, memory, metric) are stores
written directly in the shapes those commands record.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from report_helpers import PERSONAS, run_eval
from typer.testing import CliRunner

from personagraph.store import RunStore


@pytest.fixture(scope="session")
def eval_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An eval run: two personas, models test:a and test:xss, judges test:j1 and test:xssjudge."""
    run_dir = tmp_path_factory.mktemp("eval") / "run"
    with pytest.MonkeyPatch.context() as monkeypatch:
        run_eval(run_dir, monkeypatch, *(x for p in PERSONAS for x in ("--persona", p)),
                 "--model", "test:a", "--model", "test:xss", "--judge", "test:j1", "--judge", "test:xssjudge",
                 "--environments", "2")
    return run_dir


@pytest.fixture(scope="session")
def eval_run_b(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same personas and generator as ``eval_run`` (so the same questions) with the model test:b."""
    run_dir = tmp_path_factory.mktemp("eval_b") / "run"
    with pytest.MonkeyPatch.context() as monkeypatch:
        run_eval(run_dir, monkeypatch, *(x for p in PERSONAS for x in ("--persona", p)),
                 "--model", "test:b", "--judge", "test:j1", "--judge", "test:xssjudge", "--environments", "2")
    return run_dir


def _cli(*args: str) -> None:
    from personagraph.cli import app

    result = CliRunner().invoke(app, ["-q", *args])
    assert result.exit_code == 0, result.output


@pytest.fixture(scope="session")
def session_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real ``simulate`` run: adversarial sessions of test:refuser (breaks) and normal ones of test:xss."""
    run_dir = tmp_path_factory.mktemp("sessions") / "run"
    _cli("simulate", "-p", "A 70-year-old retired cowboy from Texas", "-m", "test:refuser", "--user-model",
         "test:u", "-j", "test:j1", "-j", "test:j2", "-t", "5", "-k", "2", "--adversarial", "--run-dir", str(run_dir))
    _cli("simulate", "-p", "A nurse", "-m", "test:xss", "--user-model", "test:u", "-j", "test:j1", "-t", "4",
         "-k", "2", "--run-dir", str(run_dir))
    return run_dir


@pytest.fixture(scope="session")
def persobench_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real ``persobench`` run (vanilla and CoT) with metrics that need no model: ROUGE and Dist."""
    folder = tmp_path_factory.mktemp("persobench")
    data = folder / "data.csv"
    data.write_text('personas,context,act_response\n"I love dogs. I live in Ohio.","Hi! How are you?",'
                    '"Great, just walked my dog."\n"I am a chef.","What do you do?","I cook at a small bistro."\n')
    for extra in ((), ("--cot",)):
        _cli("persobench", "--data", str(data), "--model", "test:a", "--metrics", "rouge,dist",
             "--run-dir", str(folder / "run"), *extra)
    return folder / "run"


@pytest.fixture
def memory_run(tmp_path: Path) -> Path:
    """Memory-retrieval-shaped: RetrievalScores (values[metric][k], ×100) per method in summary.json."""
    run_dir = tmp_path / "memory"
    store = RunStore(run_dir)
    store.set_meta("kind", "memory-retrieval")
    store.close()

    def scores(base: float) -> dict:
        return {"queries": 160, "ks": [1, 3, 5, 10], "values": {
            metric: {str(k): round(base * (1 + k / 10) * factor, 2) for k in (1, 3, 5, 10)}
            for metric, factor in (("MRR", 1.0), ("Recall", 1.3), ("nDCG", 1.1))}}

    (run_dir / "summary.json").write_text(json.dumps({"kind": "memory-retrieval",
                                                      "methods": {"bm25": scores(20), "dense": scores(30)}}))
    return run_dir


@pytest.fixture
def longlamp_run(tmp_path: Path) -> Path:
    """LongLaMP-shaped: one unit per retriever × k."""
    run_dir = tmp_path / "longlamp"
    store = RunStore(run_dir)
    store.set_meta("kind", "longlamp")
    for retriever, base in (("bm25", 0.2), ("dense", 0.25)):
        for k in (1, 2, 4):
            store.set_meta(f"summary:test:a|{retriever}|{k}", {
                "model": "test:a", "retriever": retriever, "k": k, "items": 5, "generated": 5, "unfinished": 0,
                "cost": {"n": 5, "failures": 0, "failure_ratio": 0.0, "mean_response_time_s": 0.2},
                "scores": {"n": 5, "failures": 0, "failure_ratio": 0.0,
                           "means": {"rouge1": base + k / 100, "rougeL": base / 2 + k / 100, "meteor": base}},
            })
    store.close()
    return run_dir


@pytest.fixture
def behavior_run(tmp_path: Path) -> Path:
    run_dir = tmp_path / "behavior"
    store = RunStore(run_dir)
    store.set_meta("kind", "behavior")  # metrics/behavior.py KIND
    store.set_meta("summary", {
        "labeller": "llm:test:j1", "dialogues": 3, "labelled_utterances": 20, "labeller_failures": 1,
        "kappa": {"value": 0.41, "ci_low": 0.2, "ci_high": 0.6, "n": 20}, "system": "responses.jsonl",
        "ba": {"value": 0.55, "ci_low": 0.4, "ci_high": 0.7, "n": 12}, "responses": 12, "failed_responses": 1,
        "label_counts": {"human": {"credibility": 5, "no_strategy": 3}, "system": {"credibility": 2,
                                                                                    "offer_help": 4}},
    })
    store.close()
    return run_dir


@pytest.fixture
def madial_run(tmp_path: Path) -> Path:
    """``memory eval-dialogue``-shaped: madial_response/verdict/summary records, no ``kind`` meta."""
    from report_helpers import SCRIPT

    run_dir = tmp_path / "madial"
    store = RunStore(run_dir)
    store.set_meta("madial_dialogue_config", {"setting": 2, "model": "test:m", "judge": "test:j", "seed": 1})
    criteria = ("naturalness", "style_coherence", "memory_injection", "emotional_support", "emotion_improvement")
    for turn, (reply, score) in enumerate(((f"I remember {SCRIPT}", 0), ("Nice to see you", 3))):
        key = f"s2:0:{turn}"
        store.put("madial_response", key, {"key": key, "dialogue": 0, "turn": turn, "user_id": "1",
                                            "candidate_ids": ["1", "7"], "chosen_id": "1", "reply": reply,
                                            "status": "ok", "error": None, "reference": "Remember the lake?"})
        store.put("madial_verdict", key, {"key": key, "status": "ok", "intimacy_win": bool(score),
                                           "recognized_gold": True, "recognized_relevant": True,
                                           "chose_memory": True, "scores": {
                                               c: {"score": score, "points": [0, 0, 0], "rationale": f"why {c}",
                                                   "error": None} for c in criteria}})
    store.put("madial_summary", "s2", {"setting": 2, "model": "test:m", "judge": "test:j", "turns": 2,
                                       "failed_replies": 0, "criteria": {c: 1.5 for c in criteria},
                                       "intimacy_win_rate": 0.5, "chose_memory": 1.0, "recognized_gold": 1.0,
                                       "recognized_relevant": 1.0})
    store.close()
    return run_dir
