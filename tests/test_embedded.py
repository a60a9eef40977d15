"""End to end on the real embedded models (llama.cpp's server on the CPU), on tiny inputs."""

from __future__ import annotations

import pytest

from personagraph.agents import PersonaAgent
from personagraph.judges.judge import score_response
from personagraph.judges.protocols import asked_checks, evidence_model, get_protocol, read_gates
from personagraph.judges.rubrics import load_rubric
from personagraph.models import ModelClient
from personagraph.models.engine import engine_for

pytestmark = pytest.mark.embedded
COWBOY = "A 70-year-old retired cowboy from Texas"


async def test_persona_agent_answers_in_persona(run_dir) -> None:
    agent = PersonaAgent(ModelClient.create("local:qwen2.5-coder-0.5b", "persona", max_tokens=48))
    reply = await agent.respond(COWBOY, [{"role": "user", "content": "What is your favorite way to travel?"}])
    assert reply.ok and len(reply.text.split()) >= 5


async def test_judge_verdict_from_the_embedded_judge_validates(run_dir) -> None:
    """The default protocol for local: judges (evidence: the fitted model of judges/evidence.yaml over the
    text evidence and the engine's likelihoods, gated by the persona-break markers; the model reads no
    check, so the judge is asked nothing), through the engine: the score is the documented one."""
    judge = ModelClient.create("local:qwen2.5-coder-1.5b", "judge", max_tokens=120)
    rubric = load_rubric("persona_consistency")
    protocol = get_protocol(None, judge.name)
    model = evidence_model(rubric)
    assert protocol.name == "evidence" and protocol.reply == "checklist" and model is not None
    assert asked_checks(protocol, rubric) == ()
    assert [c.name for c in read_gates(protocol, rubric)] == ["in_character"]
    plain = "Forty years I rode herd on cattle across West Texas, and I'd do it again tomorrow."
    for response, gate in ((plain, 1.0), ("As an AI language model, I have never ridden a horse.", 0.0)):
        scored = await score_response(judge, rubric, persona=COWBOY, question="What did you do for a living?",
                                      response=response)
        assert scored.status == "ok", scored.error
        assert scored.inputs["check:in_character"] == gate and judge.meter.total_calls == 0
        share = model.share({name: scored.inputs[name] for name in model.inputs})
        assert scored.score == 1 + round(4 * share * gate)
        assert scored.expected == pytest.approx(1 + 4 * share * gate)
        assert scored.inputs["persona_pmi"] != 0.0  # read from the engine


async def test_the_engine_runs_on_this_cpu() -> None:
    """A real call on whatever CPU runs the tests (a crash in llama_decode on AMX CPUs is what it guards
    against), through the portable build whose CPU variant ggml picks at start."""
    client = ModelClient.create("local:qwen2.5-coder-0.5b", "persona", max_tokens=8)
    reply = await client.complete([{"role": "user", "content": "Say howdy."}])
    assert reply.ok and reply.text.strip(), reply.error
    engine = engine_for("qwen2.5-coder-0.5b")
    assert engine.deaths == [] and engine.pid is not None
