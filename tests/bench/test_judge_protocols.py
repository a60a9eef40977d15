"""bench/judge_protocols.py on the deterministic test models: what a verdict read is recorded and said."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

import pytest

from bench.judge_protocols import judge_all, load
from personagraph.models.testing import register_script


def _repeats_one_answer(messages: list, schema: dict | None) -> str:
    """A writer that gives every score the same example answer (as a 1.5B often does), and a judge."""
    if schema and "score_1" in schema.get("properties", {}):
        return json.dumps({f"score_{s}": "I cannot role-play." for s in range(1, 6)})
    return json.dumps({"rationale": "It fits the persona.", "score": 4})


def test_verdicts_without_their_exemplars_are_counted_and_said(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    register_script("repeater", _repeats_one_answer)
    judged, _ = load(tmp_path, ["rubric_dev"], per_file=0, seed=0)
    args = argparse.Namespace(judge="test:repeater", base_url=None, concurrency=2, exemplars=True,
                              cache=tmp_path / "cache")
    rows = asyncio.run(judge_all(args, judged[:4], ["rationale"]))
    assert [r["status"] for r in rows] == ["ok"] * 4  # a verdict without examples is still a verdict
    assert not any(r["read_exemplars"] for r in rows)
    said = capsys.readouterr().out
    assert "verdicts read the rubric alone" in said and "4 of 4 verdicts" in said
    assert "must differ" in said  # the writer's error, as validation gave it
