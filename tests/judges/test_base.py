"""The Judge protocol and its adapter: model clients are judges, plug-ins become judges, bad replies fail."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from personagraph import evaluate
from personagraph.judges.base import Judge, PluginJudge, as_judge
from personagraph.models import ModelClient


class Reply(BaseModel):
    score: int


async def test_a_plugin_reply_is_parsed_as_the_schema() -> None:
    judge = as_judge(lambda messages: 'Sure. {"score": 4}', "inline:judge")
    assert isinstance(judge, PluginJudge) and judge.name == "inline:judge"
    reply = await judge.structured([{"role": "user", "content": "rate"}], Reply)
    assert reply.ok and reply.value == Reply(score=4)


async def test_a_reply_that_is_not_a_verdict_fails_with_its_raw_text() -> None:
    reply = await as_judge(lambda messages: "I like it a lot.", "inline:judge").structured([], Reply)
    assert not reply.ok and reply.value is None and reply.raw == "I like it a lot."
    assert "inline:judge: reply is not a valid verdict" in (reply.error or "")


def test_a_model_client_already_is_a_judge() -> None:
    client = ModelClient.create("test:judge", "judge")
    assert isinstance(client, Judge) and as_judge(client, "unused") is client


def test_a_plugin_judge_path_judges_an_eval(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "fixed_judge.py").write_text(
        'def judge(messages):\n    return \'{"score": 4, "rationale": "ok"}\'\n'
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    summary = evaluate(
        "A nurse",
        models=["test:agent"],
        judges=["fixed_judge:judge"],
        generator="test:gen",
        environments=1,
        questions_per_task=1,
        run_dir=tmp_path / "run",
    )
    assert summary.per_judge_mean == {"fixed_judge:judge": 4.0} and summary.failed_verdicts == 0
