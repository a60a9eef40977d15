"""End to end on the real embedded models (llama.cpp on the CPU), on tiny inputs."""

from __future__ import annotations

import pytest

from personagraph.agents import PersonaAgent
from personagraph.judges.judge import score_response
from personagraph.judges.rubrics import load_rubric
from personagraph.models import ModelClient
from personagraph.schemas import JudgeReply

pytestmark = pytest.mark.embedded
COWBOY = "A 70-year-old retired cowboy from Texas"


async def test_persona_agent_answers_in_persona(run_dir) -> None:
    agent = PersonaAgent(ModelClient.create("local:qwen2.5-coder-0.5b", "persona", max_tokens=48))
    reply = await agent.respond(COWBOY, [{"role": "user", "content": "What is your favorite way to travel?"}])
    assert reply.ok and len(reply.text.split()) >= 5


async def test_judge_verdict_from_the_embedded_judge_validates(run_dir) -> None:
    judge = ModelClient.create("local:qwen2.5-coder-1.5b", "judge", max_tokens=120)
    scored = await score_response(
        judge,
        load_rubric("linguistic_habits"),
        persona=COWBOY,
        question="How would you greet a stranger at the county fair?",
        response="Howdy, partner! Pull up a hay bale and tell me what brings you 'round these parts.",
    )
    assert scored.status == "ok", scored.error
    verdict = JudgeReply.model_validate_json(scored.raw) if scored.raw.strip().startswith("{") else None
    assert verdict is not None and 1 <= verdict.score <= 5 and verdict.rationale.strip()
    assert scored.score == verdict.score


def test_loaded_models_are_closed_once_and_can_be_loaded_again() -> None:
    from personagraph.models import local

    first = local.load_llama("qwen2.5-coder-0.5b")
    local.close_models()
    assert local._models == {}
    local.close_models()  # at exit it runs again after tests closed everything: a no-op
    again = local.load_llama("qwen2.5-coder-0.5b")
    assert again is not first and again.tokenize(b"howdy")
