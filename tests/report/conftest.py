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
from report_helpers import PERSONAS, run_eval, session_record

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


@pytest.fixture
def session_run(tmp_path: Path) -> Path:
    run_dir = tmp_path / "sessions"
    store = RunStore(run_dir)
    store.set_meta("kind", "simulate")
    store.set_meta("config", {"model": "test:agent", "judges": ["test:j1", "test:j2"], "seed": 3})
    store.put("session", "s0", session_record(0, broke=True))
    store.put("session", "s1", session_record(1, broke=False, persona="A librarian"))
    store.close()
    return run_dir


@pytest.fixture
def memory_run(tmp_path: Path) -> Path:
    run_dir = tmp_path / "memory"
    store = RunStore(run_dir)
    store.set_meta("kind", "memory-retrieval")
    store.close()
    (run_dir / "summary.json").write_text(json.dumps({"metrics": [
        {"retriever": "bm25", "recall@1": 0.21, "recall@5": 0.52, "recall@10": 0.71, "mrr": 0.33},
        {"retriever": "dense", "recall@1": 0.34, "recall@5": 0.66, "recall@10": 0.83, "mrr": 0.45},
    ]}))
    return run_dir


@pytest.fixture
def metric_run(tmp_path: Path) -> Path:
    run_dir = tmp_path / "persobench"
    store = RunStore(run_dir)
    store.set_meta("kind", "persobench")
    store.set_meta("summary:test:a|vanilla", {
        "model": "test:a", "mode": "vanilla", "data": "x.csv", "items": 4, "generated": 4, "unfinished": 0,
        "cost": {"n": 4, "failures": 1, "failure_ratio": 0.25, "mean_response_time_s": 0.12},
        "scores": {"metrics": ["rouge", "dist"], "keys": ["rouge1", "dist1"], "n": 4, "failures": 1,
                   "failure_ratio": 0.25, "means": {"rouge1": 0.31, "dist1": 0.87}, "corpus": {"corpus_dist1": 0.6}},
        "llm_calls": 4, "cache_hits": 0,
    })
    store.close()
    return run_dir
