"""Session turns are scored as eval scores an answer: the same judge call and the same persona-break cap."""

from __future__ import annotations

import json
from pathlib import Path

from personagraph import asimulate
from personagraph.judges.rubrics import load_rubric
from personagraph.judges.session import TURN_RUBRICS, score_turn
from personagraph.models import ModelClient
from personagraph.models.testing import register_script

BREAK = "As an AI language model, I don't have personal experiences, but nurses often work long shifts."

register_script("s1-generous", lambda messages, schema: json.dumps({"rationale": "Fine.", "score": 5}))


async def test_S1_a_turn_that_breaks_persona_scores_at_most_the_break_cap() -> None:
    judge = ModelClient.create("test:s1-generous", "judge")
    scores, rationales = await score_turn([judge], "A pediatric nurse", "What is your job like?", BREAK)
    for key in TURN_RUBRICS:
        rubric = load_rubric(key)
        assert scores["test:s1-generous"][rubric.task] == rubric.break_cap
        assert "capped from 5" in rationales["test:s1-generous"][rubric.task]
    plain, _ = await score_turn([judge], "A pediatric nurse", "What is your job like?",
                                "Twelve-hour shifts on the peds floor, mostly.")
    assert set(plain["test:s1-generous"].values()) == {5}


async def test_S1_simulate_caps_the_refusers_turns_as_eval_does(tmp_path: Path) -> None:
    summary = await asimulate("A pediatric nurse", model="test:refuser", user_model="test:user",
                              judges=["test:judge"], turns=3, run_dir=tmp_path / "sim_refuser")
    caps = {load_rubric(key).task: load_rubric(key).break_cap for key in TURN_RUBRICS}
    session = summary.sessions[0]
    assert session["agent_turns"] == 3
    for task, mean in session["task_means"].items():
        assert mean <= caps[task], (task, mean)


