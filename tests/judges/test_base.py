"""The Judge protocol and its adapter: model clients are judges, plug-ins become judges, bad replies fail."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

import personagraph
from personagraph import evaluate
from personagraph.judges.base import Judge, PluginJudge, as_judge
from personagraph.models import ModelClient
from tests.runs.test_judge_check import write_items
from tests.runs.test_meta_eval_outcome import write_items as write_rated_items


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


def test_a_plugin_judge_path_judges_every_kind_that_takes_judges(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--judge module:attr`` is a judge wherever judges are asked, not only in eval."""
    (tmp_path / "fixed_judge.py").write_text(
        'def judge(messages):\n    return \'{"score": 4, "rationale": "ok", "contradictions": []}\'\n'
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    judge = "fixed_judge:judge"
    session = personagraph.simulate("A nurse", model="test:agent", user_model="test:user", judges=[judge],
                                     turns=1, run_dir=tmp_path / "simulate")
    assert session.sessions[0]["task_means"] and set(session.sessions[0]["task_means"].values()) == {4.0}
    meta = personagraph.meta_evaluate(write_rated_items(tmp_path / "rated.jsonl"), judges=[judge],
                                      n_resamples=100, run_dir=tmp_path / "meta")
    assert meta.exit_code == 0 and meta.failures == []
    check = personagraph.judge_check(items=str(write_items(tmp_path / "items.jsonl")), judges=[judge],
                                     generator="test:gen", n_resamples=200, run_dir=tmp_path / "check")
    assert check.exit_code == 0 and check.failures == []
