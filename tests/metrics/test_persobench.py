"""PersoBench: CSV loading, prompts, generation with the test model, failures, resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from personagraph.errors import PersonagraphError
from personagraph.metrics.persobench import (
    CoTReply,
    PersoBenchConfig,
    load_persobench,
    persobench_messages,
)
from personagraph.metrics.scoring import ScoreConfig
from personagraph.models.testing import register_script
from personagraph.runs.persobench import run as run_persobench
from personagraph.store import RunStore

CSV = """personas,context,act_response
"[User 1 persona]: ['i have a dog.' 'i like hiking.']","User1: what do you do on weekends?\\nUser2: i go out a lot.",I take my dog hiking in the hills.
"i am a nurse. i love cooking.",User1: what's for dinner?,I will cook pasta tonight.
i hate fish.,User1: want sushi?,No thanks.
"""
FAST = ScoreConfig(metrics=["rouge", "dist"])


def write_csv(tmp_path: Path, text: str = CSV, name: str = "data.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_load_persobench(tmp_path: Path) -> None:
    items = load_persobench(write_csv(tmp_path))
    assert [item.id for item in items] == ["1", "2", "3"]
    assert items[0].persona == ["i have a dog.", "i like hiking."]
    assert items[0].context == "User1: what do you do on weekends?\nUser2: i go out a lot."
    assert items[1].persona == ["i am a nurse.", "i love cooking."]
    assert items[2].act_response == "No thanks."
    assert len(load_persobench(write_csv(tmp_path), limit=2)) == 2


def test_load_persobench_bad_inputs(tmp_path: Path) -> None:
    with pytest.raises(PersonagraphError, match=r"bad.csv: missing column act_response \(header has: personas, context"):
        load_persobench(write_csv(tmp_path, "personas,context\na,b\n", "bad.csv"))
    with pytest.raises(PersonagraphError, match=r"empty.csv: empty file"):
        load_persobench(write_csv(tmp_path, "", "empty.csv"))
    with pytest.raises(PersonagraphError, match=r"cell.csv row 2: empty 'context'"):
        load_persobench(write_csv(tmp_path, "personas,context,act_response\na.,b,c\nd.,,f\n", "cell.csv"))
    with pytest.raises(PersonagraphError, match=r"missing.csv: no such file"):
        load_persobench(tmp_path / "missing.csv")


def test_prompts_and_cot_field_order(tmp_path: Path) -> None:
    item = load_persobench(write_csv(tmp_path))[0]
    vanilla = persobench_messages(item, "vanilla")
    cot = persobench_messages(item, "cot")
    assert vanilla[0]["role"] == "system" and "- i have a dog.\n- i like hiking." in vanilla[1]["content"]
    assert "User2: i go out a lot." in vanilla[1]["content"]
    assert "step by step" in cot[1]["content"] and "step by step" not in vanilla[1]["content"]
    assert list(CoTReply.model_json_schema()["properties"]) == ["reasoning", "response"]


async def test_run_generates_scores_and_resumes(tmp_path: Path) -> None:
    config = PersoBenchConfig(data=write_csv(tmp_path), model="test:default", cot=True, score=FAST)
    first = await run_persobench(config, tmp_path / "run")
    assert (first.items, first.generated, first.llm_calls) == (3, 3, 3)
    assert first.cost.failure_ratio == 0.0 and first.cost.mean_response_time_s is not None
    assert first.scores.means["dist1"] is not None
    rows = [json.loads(line) for line in (tmp_path / "run" / "persobench_test-default_cot.jsonl").read_text().splitlines()]
    assert [row["id"] for row in rows] == ["1", "2", "3"]
    assert rows[0]["reasoning"] and rows[0]["response"] and "rouge1" in rows[0]
    second = await run_persobench(config, tmp_path / "run")
    assert second.llm_calls == 0 and second.generated == 3
    # another mode is another unit in the same run directory
    vanilla = await run_persobench(config.model_copy(update={"cot": False}), tmp_path / "run")
    assert vanilla.llm_calls == 3
    summaries = json.loads((tmp_path / "run" / "persobench_summary.json").read_text())
    assert set(summaries) == {"test:default|cot", "test:default|vanilla"}


async def test_parse_failures_count_in_the_failure_ratio_not_as_zeros(tmp_path: Path) -> None:
    def half_broken(messages, schema):
        nurse = any("nurse" in str(m["content"]) for m in messages)  # also on the format-reminder retry
        return "no json here" if nurse else json.dumps({"response": "I take my dog out."})

    register_script("half-broken", half_broken)
    config = PersoBenchConfig(data=write_csv(tmp_path), model="test:half-broken", score=FAST)
    summary = await run_persobench(config, tmp_path / "run")
    assert summary.cost.failures == 1 and summary.cost.failure_ratio == pytest.approx(1 / 3)
    assert summary.scores.failed == [False, True, False]
    assert summary.scores.means["dist1"] == pytest.approx(1.0)  # the failure is not averaged in as 0
    worst = await run_persobench(config.model_copy(update={"score": ScoreConfig(metrics=["dist"],
                                                                                failures_as_worst=True)}),
                                 tmp_path / "run")
    assert worst.scores.means["dist1"] == pytest.approx(2 / 3)


async def test_empty_response_is_a_failure(tmp_path: Path) -> None:
    register_script("empty-response", lambda messages, schema: json.dumps({"response": "  "}))
    config = PersoBenchConfig(data=write_csv(tmp_path), model="test:empty-response", score=FAST)
    summary = await run_persobench(config, tmp_path / "run")
    assert summary.cost.failure_ratio == 1.0 and summary.scores.means["rouge1"] is None


async def test_failed_calls_are_not_stored_and_retried_on_resume(tmp_path: Path) -> None:
    state = {"down": True}

    def flaky_endpoint(messages, schema):
        if state["down"] and "sushi" in messages[-1]["content"]:
            raise PermissionError("endpoint refused the request")
        return json.dumps({"response": "No fish for me, thanks."})

    register_script("endpoint", flaky_endpoint)
    config = PersoBenchConfig(data=write_csv(tmp_path), model="test:endpoint", score=FAST)
    first = await run_persobench(config, tmp_path / "run")
    assert first.unfinished == 1 and first.generated == 2 and first.cost.failures == 0
    state["down"] = False
    second = await run_persobench(config, tmp_path / "run")
    assert second.unfinished == 0 and second.generated == 3 and second.llm_calls == 1


async def test_missing_nli_model_fails_before_generating(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PERSONAGRAPH_NLI_MODEL", raising=False)
    config = PersoBenchConfig(data=write_csv(tmp_path), model="test:default",
                              score=ScoreConfig(metrics=["c_score"]))
    with pytest.raises(PersonagraphError, match="no NLI model configured"):
        await run_persobench(config, tmp_path / "run")
    assert not (tmp_path / "run").exists()


async def test_run_dir_of_another_kind_is_refused(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "run")
    store.set_meta("kind", "eval")
    store.close()
    config = PersoBenchConfig(data=write_csv(tmp_path), model="test:default", score=FAST)
    with pytest.raises(PersonagraphError, match="holds a run of kind 'eval', not persobench"):
        await run_persobench(config, tmp_path / "run")
