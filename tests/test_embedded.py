"""End to end on the real embedded models (llama.cpp's server on the CPU), on tiny inputs."""

from __future__ import annotations

import pytest

from personagraph.agents import PersonaAgent
from personagraph.judges.judge import score_response
from personagraph.judges.protocols import (
    asked_checks,
    checklist_schema,
    evidence_model,
    gate_share,
    get_protocol,
    is_good,
    persona_facts,
)
from personagraph.judges.rubrics import load_rubric
from personagraph.models import ModelClient
from personagraph.models.client import extract_json
from personagraph.models.engine import engine_for

pytestmark = pytest.mark.embedded
COWBOY = "A 70-year-old retired cowboy from Texas"


async def test_persona_agent_answers_in_persona(run_dir) -> None:
    agent = PersonaAgent(ModelClient.create("local:qwen2.5-coder-0.5b", "persona", max_tokens=48))
    reply = await agent.respond(COWBOY, [{"role": "user", "content": "What is your favorite way to travel?"}])
    assert reply.ok and len(reply.text.split()) >= 5


async def test_judge_verdict_from_the_embedded_judge_validates(run_dir) -> None:
    """The default protocol for local: judges (evidence: the checklist call, then the fitted model of
    judges/evidence.yaml over the text evidence, gated by the call's disclosure answer, the one question
    asked), through the engine: the reply parses, and the score is the documented one."""
    judge = ModelClient.create("local:qwen2.5-coder-1.5b", "judge", max_tokens=120)
    rubric = load_rubric("persona_consistency")
    protocol = get_protocol(None, judge.name)
    checks = asked_checks(protocol, rubric)  # the fitted model reads no check: the disclosure gate alone
    model = evidence_model(rubric)
    assert protocol.name == "evidence" and protocol.reply == "checklist" and model is not None
    assert [c.name for c in checks] == ["in_character"]
    scored = await score_response(
        judge,
        rubric,
        persona=COWBOY,
        question="What did you do for a living?",
        response="Forty years I rode herd on cattle across West Texas, and I'd do it again tomorrow.",
    )
    assert scored.status == "ok", scored.error
    facts = len(persona_facts(COWBOY))
    answers = checklist_schema(checks, facts).model_validate(extract_json(scored.raw)).model_dump()
    stated = [1.0 if is_good(c, answers[f"q{i}"]) else 0.0 for i, c in enumerate(checks, start=1)]
    share = model.share({name: scored.inputs[name] for name in model.inputs})
    assert scored.score == 1 + round(4 * share * gate_share(checks, stated))
    assert scored.expected is not None and 1.0 <= scored.expected <= 5.0


async def test_the_engine_runs_on_this_cpu() -> None:
    """A real call on whatever CPU runs the tests (a crash in llama_decode on AMX CPUs is what it guards
    against), through the portable build whose CPU variant ggml picks at start."""
    client = ModelClient.create("local:qwen2.5-coder-0.5b", "persona", max_tokens=8)
    reply = await client.complete([{"role": "user", "content": "Say howdy."}])
    assert reply.ok and reply.text.strip(), reply.error
    engine = engine_for("qwen2.5-coder-0.5b")
    assert engine.deaths == [] and engine.pid is not None
