"""Control arms (``eval --controls``): agents whose correct ranking is known answer beside the agent, and a
judge that cannot tell them apart is flagged."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from personagraph.agents.controls import (
    GENERIC_PERSONA,
    REFUSAL_NAME,
    REFUSAL_TEXT,
    contrast_persona,
    control_names,
    paired_standing,
)
from personagraph.judges.validity import content_words, contrast_personas
from personagraph.models import Completion
from personagraph.models.testing import register_script, value_for
from personagraph.report.html import build_report
from personagraph.report.load import load_run
from personagraph.report.sections import control_lines, controls_table
from personagraph.runs.eval import EvalConfig
from personagraph.runs.eval import run as run_eval
from personagraph.schemas import Persona
from personagraph.store import RunStore

COWBOY = Persona(description="A 70-year-old retired cowboy from Texas")
MARK = "Speaking in character as"


class Marked:
    """An agent that says which persona it plays: a judge can tell the real persona from any other."""

    name = "marked"

    def __init__(self, fail_for: str | None = None) -> None:
        self.fail_for = fail_for
        self.calls = 0

    async def respond(self, persona: str, messages: list[dict[str, str]]) -> Completion:
        self.calls += 1
        if persona == self.fail_for:
            return Completion("failed", error="the agent is down for this persona")
        return Completion("ok", f"{MARK} {persona}: I'd saddle up and ride, partner.")


def _sighted(messages: list[dict[str, Any]], schema: dict[str, Any] | None) -> str:
    """5 for an answer in character as the cowboy, 1 for anything else (contrast, generic, refusal)."""
    text = "\n".join(str(m.get("content", "")) for m in messages)
    if schema is None:
        return "ok"
    reply = value_for(schema, random.Random(0), schema, messages)
    reply["score"] = 5 if f"{MARK} {COWBOY.description}" in text else 1
    return json.dumps(reply)


def _blind(messages: list[dict[str, Any]], schema: dict[str, Any] | None) -> str:
    """The same verdict for every answer: it cannot tell the agent from its controls."""
    if schema is None:
        return "ok"
    reply = value_for(schema, random.Random(0), schema, messages)
    reply["score"] = 3
    return json.dumps(reply)


register_script("sighted", _sighted)
register_script("blind", _blind)


def config(**overrides: Any) -> EvalConfig:
    base = dict(personas=[COWBOY], models=["marked"], judges=["test:sighted"], generator="test:gen",
                environments=2, questions_per_task=2, judge_protocol="rationale", controls=True)
    return EvalConfig(**{**base, **overrides})


async def test_controls_answer_beside_the_agent_and_a_sighted_judge_ranks_them_below(run_dir: Path) -> None:
    agent = Marked()
    summary = await run_eval(config(), run_dir, agents=[agent])
    store = RunStore(run_dir)
    answers = store.records("answer")
    questions = store.records("question")
    assert {a["model"] for a in answers} == {"marked", *control_names(["marked"])}
    assert len(answers) == 4 * len(questions)
    texts = {a["model"]: a["text"] for a in answers if a["question_id"] == questions[0]["id"]}
    assert texts[REFUSAL_NAME] == REFUSAL_TEXT
    assert texts["control:generic:marked"] == f"{MARK} {GENERIC_PERSONA}: I'd saddle up and ride, partner."
    assert contrast_persona(COWBOY.description) in texts["control:contrast:marked"]
    # the agents under test are scored as before; the arms apart
    assert list(summary.models) == ["marked"]
    controls = summary.controls
    assert set(controls["arms"]) == set(control_names(["marked"]))
    contrast_score = controls["arms"]["control:contrast:marked"]["persona_score"]
    assert contrast_score < summary.models["marked"]["persona_score"]
    rows = {row["kind"]: row for row in controls["standing"]}
    assert set(rows) == {"generic", "contrast", "refusal"}
    for row in rows.values():
        assert row["resampled"] == "questions within tasks" and row["n"] == len(questions)
        assert row["diff"] > 0 and row["ci"][0] > 0 and row["clearly_below"] and not row["flagged"]
    assert not controls["flagged"] and controls["flags"] == []
    on_disk = json.loads((run_dir / "summary.json").read_text())
    assert on_disk["controls"]["flagged"] is False
    assert not summary.failures and summary.exit_code == 0
    # resumable like every item: the same command makes 0 calls
    calls = agent.calls
    again = await run_eval(config(), run_dir, agents=[agent])
    assert again.llm_calls == 0 and agent.calls == calls
    assert again.controls == summary.controls


async def test_a_judge_that_cannot_tell_them_apart_is_flagged(run_dir: Path) -> None:
    summary = await run_eval(config(judges=["test:blind"]), run_dir, agents=[Marked()])
    controls = summary.controls
    contrast = next(row for row in controls["standing"] if row["kind"] == "contrast")
    assert contrast["diff"] == 0 and not contrast["clearly_below"] and contrast["flagged"]
    assert controls["flagged"]
    assert any("control:contrast:marked" in line and "clearly below" in line for line in controls["flags"])
    # the summary, the terminal lines and the report all say so
    assert json.loads((run_dir / "summary.json").read_text())["controls"]["flagged"] is True
    lines = control_lines(summary.model_dump())
    assert lines and all(warn for _, warn in lines)
    table = controls_table(summary.model_dump())
    assert table is not None and any(row["verdict"].startswith("⚠") for row in table.rows)
    page = build_report([load_run(run_dir)])
    assert "Control arms: the judges&#x27; standing" in page or "Control arms: the judges' standing" in page
    assert "instrument flagged" in page


async def test_a_control_arms_failure_counts_like_any_item_and_is_retried(run_dir: Path) -> None:
    contrast = contrast_persona(COWBOY.description)
    summary = await run_eval(config(), run_dir, agents=[Marked(fail_for=contrast)])
    failed = [f for f in summary.failures if f.stage == "answers"]
    assert failed and {f.model for f in failed} == {"control:contrast:marked"}
    assert summary.exit_code != 0
    healed = Marked()
    again = await run_eval(config(), run_dir, agents=[healed])
    assert not again.failures and again.exit_code == 0
    assert again.recovered == len(failed)
    assert healed.calls == len(failed)  # only the failed control answers are asked again


async def test_controls_added_to_a_finished_run_ask_only_the_arms(run_dir: Path) -> None:
    agent = Marked()
    first = await run_eval(config(controls=False), run_dir, agents=[agent])
    assert first.controls == {}
    questions = len(RunStore(run_dir).records("question"))
    before = agent.calls
    with_controls = await run_eval(config(), run_dir, agents=[agent])
    assert agent.calls - before == 2 * questions  # the generic and contrast arms; the refusal needs no call
    assert with_controls.models["marked"]["persona_score"] == first.models["marked"]["persona_score"]
    assert with_controls.roles["judge"]["calls"] == 3 * questions


def test_the_defaults_keep_the_fingerprint_of_runs_made_before_controls(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = config(controls=False)
    now = cfg.fingerprint()
    dump = EvalConfig.model_dump

    def before_the_fields(self: EvalConfig, **kwargs: Any) -> dict[str, Any]:  # a config without them
        return {k: v for k, v in dump(self, **kwargs).items() if k not in ("controls", "samples", "pass_threshold")}

    monkeypatch.setattr(EvalConfig, "model_dump", before_the_fields)
    assert cfg.fingerprint() == now
    monkeypatch.undo()
    assert config().fingerprint() != now and config(controls=False, samples=2).fingerprint() != now


def test_the_contrast_persona_shares_no_word_with_the_real_one() -> None:
    chosen = contrast_persona(COWBOY.description)
    assert chosen in contrast_personas()
    assert not content_words(chosen) & content_words(COWBOY.description)
    assert contrast_persona(COWBOY.description) == chosen


def test_paired_standing_pools_questions_when_a_task_has_one() -> None:
    keys = [("Expected Action", "q1"), ("Linguistic Habits", "q2"), ("Toxicity Control", "q3")]
    agent = dict(zip(keys, [4.0, 5.0, 3.0], strict=True))
    control = dict(zip(keys, [1.0, 2.0, 1.0], strict=True))
    row = paired_standing(agent, control)
    assert row["resampled"] == "questions" and row["n"] == 3
    assert row["diff"] == pytest.approx((3 + 3 + 2) / 3)
    assert row["clearly_below"] and row["ci"][0] > 0
    assert paired_standing(agent, {})["ci"] is None
