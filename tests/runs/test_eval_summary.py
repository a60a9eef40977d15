"""``build_summary``'s numbers on a small finished store, pinned: a faster way of reading the store or of
computing the scores must give every value of ``summary.json`` unchanged."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from personagraph.api import evaluate
from personagraph.runs.eval import EvalConfig, build_summary
from personagraph.schemas import Persona
from personagraph.store import STORE_FILE, RunStore

PERSONAS = ["A 70-year-old retired cowboy from Texas", "A pediatric nurse from Ohio",
            "A 25-year-old poet from Kyiv"]
# The SHA-256 of each summary's canonical JSON (see _digest), computed by the code these values were first
# pinned with. After a change meant to move the scores, print _digest(...) of each and pin the new ones.
PINNED = {
    "as_run": "dafa880e7ae589ad52770c2c328aeafd542e1bb087bf1e15cea78082e6b03963",
    "integer_one_never_ran": "81c8a8b94c39d2406fcddfe763edea10e61299daea1a78085f0b81ec70bbfa9f",
    "non_answers_excluded": "c5a5f08d7fadc45c72d1809f1d14a58a2ab4ac3626e6e78de4cb13deadf5669c",
    "one_sample": "d69d4390aaa6c5899a833dad889131b9d746ff71ed403cb70a1e0e2e724818fa",
}


def _digest(summary: dict[str, Any]) -> str:
    """The summary's canonical JSON hashed, without what a rerun of the same calls changes: the calls'
    latency, and the order of the failures and shortfalls (rows of equal write time are ordered by id)."""
    tokens = [{k: v for k, v in row.items() if k != "latency_s"} for row in summary["tokens"]]
    summary = dict(summary, tokens=tokens)
    for name in ("failures", "shortfalls"):
        summary[name] = sorted(summary[name], key=lambda row: json.dumps(row, sort_keys=True))
    return hashlib.sha256(json.dumps(summary, sort_keys=True).encode()).hexdigest()


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run of two agents (one never answers) × two samples, their control arms, two judges with expected
    scores; then one of its records deleted, as by hand."""
    run_dir = tmp_path_factory.mktemp("summary") / "run"
    evaluate(PERSONAS, run_dir=run_dir, models=["test:a", "test:empty"], judges=["test:j1", "test:j2"],
             generator="test:gen", environments=2, questions_per_task=1, samples=2, controls=True,
             concurrency=4)
    with sqlite3.connect(run_dir / STORE_FILE) as db:
        db.execute("DELETE FROM records WHERE rowid = "
                   "(SELECT min(rowid) FROM records WHERE kind = 'item_score')")
    return run_dir


def test_the_summary_of_a_finished_store_keeps_every_value(finished: Path) -> None:
    store = RunStore(finished, readonly=True, lock=False)
    try:
        config = EvalConfig.model_validate(store.get_meta("config"))
        variants = {
            "as_run": config,
            "integer_one_never_ran": config.model_copy(update={  # and a persona that has no unit
                "score_kind": "integer", "personas": [*config.personas, Persona(description="A chef")]}),
            "non_answers_excluded": config.model_copy(update={"non_answers": "exclude"}),
            "one_sample": config.model_copy(update={"samples": 1}),  # another config's units: none ended
        }
        summaries = {name: build_summary(store, c).model_dump(mode="json") for name, c in variants.items()}
    finally:
        store.close()
    seen = summaries["as_run"]
    assert seen["score_kind"] == "expected" and seen["incomplete"] == 1 and len(seen["failures"]) == 60
    assert summaries["integer_one_never_ran"]["incomplete"] == 2
    assert summaries["one_sample"]["answers_not_asked"] == 30
    assert {name: _digest(summary) for name, summary in summaries.items()} == PINNED
