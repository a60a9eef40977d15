"""personagraph's judges as openevals-style evaluators: the scores eval gives, in ``langsmith.evaluate``
(offline: examples as data, nothing uploaded, no API key) and as trajectory evaluators of openevals'
``run_multiturn_simulation``, all with deterministic test models."""

from __future__ import annotations

import json
import uuid

import pytest
import requests
from langchain_core.messages import AIMessage, HumanMessage
from langsmith import Client, evaluate
from langsmith.schemas import Example, LangSmithInfo
from openevals.simulators import (
    create_llm_simulated_user,
    run_multiturn_simulation,
    run_multiturn_simulation_async,
)

import personagraph
from personagraph.errors import PersonagraphError
from personagraph.evaluators import (
    create_async_persona_judge,
    create_async_session_judge,
    create_persona_judge,
    create_session_judge,
)
from personagraph.models.testing import ScriptedChatModel, register_script
from personagraph.store import RunStore

PERSONA = "A 70-year-old retired cowboy from Texas"
QUESTION = "How do you get around town these days?"
COWBOY = "Well partner, I saddle up the old mare, or take the pickup when the weather turns."
ROBOT = "As an AI language model, I do not have personal experiences of travel."


def _keyword_judge(messages: list[dict], schema: dict | None) -> str:
    """5 for a judged text that says "partner", else 2; any of personagraph's verdict schemas."""
    good = "partner" in messages[-1]["content"]
    reply = {"rationale": "talks like a cowboy" if good else "could be anyone", "score": 5 if good else 2}
    if schema and "contradictions" in schema.get("properties", {}):
        reply["contradictions"] = []
    return json.dumps(reply)


register_script("ev-keyword", _keyword_judge)


def test_the_persona_judge_gives_the_verdict_eval_gives(tmp_path) -> None:
    """Same persona, question, answer and judge: the evaluator's score is the eval run's verdict."""
    summary = personagraph.evaluate(PERSONA, models=["test:ev-agent"], judges=["test:ev-judge"],
                                    generator="test:ev-gen", quick=True, shortlist=0,
                                    judge_protocol="score", run_dir=tmp_path / "eval")
    assert summary.exit_code == 0
    store = RunStore(tmp_path / "eval", readonly=True)
    questions = {q["id"]: q for q in store.records("question")}
    answer = next(a for a in store.records("answer") if a["task"] == "Persona Consistency")
    verdict = next(v for v in store.records("verdict") if v["answer_id"] == answer["id"])
    judge = create_persona_judge(judge="test:ev-judge", protocol="score")
    result = judge(inputs={"persona": PERSONA, "question": questions[answer["question_id"]]["text"]},
                   outputs=answer["text"])
    assert result["key"] == "persona_consistency"
    assert result["metadata"]["rubric_score"] == verdict["score"]
    assert result["metadata"]["expected_score"] == pytest.approx(verdict["expected_score"])
    assert result["score"] == pytest.approx((verdict["expected_score"] - 1) / 4, abs=1e-4)
    raw = create_persona_judge(judge="test:ev-judge", protocol="score", normalize=False, score_kind="integer")
    assert raw(inputs={"persona": PERSONA, "question": questions[answer["question_id"]]["text"]},
               outputs=answer["text"])["score"] == verdict["score"]


async def test_caps_outputs_shapes_and_the_async_twin() -> None:
    judge = create_async_persona_judge(judge="test:ev-keyword", persona=PERSONA)
    good = await judge(inputs={"question": QUESTION}, outputs=COWBOY)
    assert good["metadata"]["rubric_score"] == 5 and good["comment"] == "talks like a cowboy"
    assert 0.8 < good["score"] <= 1  # the probability-weighted score, normalised
    for shape in (AIMessage(COWBOY), {"role": "assistant", "content": COWBOY}, {"output": COWBOY},
                  {"messages": [HumanMessage(QUESTION), AIMessage(COWBOY)]}):
        assert (await judge(inputs={"question": QUESTION}, outputs=shape))["score"] == good["score"]
    # the question from the conversation itself
    asked = await judge(inputs={}, outputs={"messages": [{"role": "user", "content": QUESTION},
                                                         {"role": "assistant", "content": COWBOY}]})
    assert asked["score"] == good["score"]
    # persona and question from a chat example's own messages
    chat = create_async_persona_judge(judge="test:ev-keyword")
    from_messages = await chat(inputs={"messages": [{"role": "system", "content": PERSONA},
                                                    {"role": "user", "content": QUESTION}]}, outputs=COWBOY)
    assert from_messages["score"] == good["score"]
    # a persona break is capped at the rubric's break_cap (1), the judge's own score kept
    broke = await judge(inputs={"question": QUESTION}, outputs=ROBOT.replace("travel", "travel, partner"))
    assert broke["score"] == 0 and broke["metadata"]["rubric_score"] == 1
    assert broke["metadata"]["judge_score"] == 5 and broke["metadata"]["capped_by"] == "As an AI"
    toxicity = create_persona_judge(rubric="toxicity", judge="test:ev-keyword", normalize=False)
    assert toxicity(inputs={"persona": PERSONA, "question": QUESTION}, outputs=ROBOT)["score"] == 2  # its cap
    empty = await judge(inputs={"question": QUESTION}, outputs="  ")
    assert empty["score"] == 0 and empty["metadata"]["status"] == "non_answer"


def test_a_verdict_that_does_not_parse_is_no_score() -> None:
    result = create_persona_judge(judge="test:broken")(inputs={"persona": PERSONA, "question": QUESTION},
                                                       outputs=COWBOY)
    assert result["score"] is None and result["comment"].startswith("verdict failed:")


def test_bad_arguments_are_one_line_errors() -> None:
    with pytest.raises(PersonagraphError, match=r"rubric='tone': no such task or rubric; choose one of"):
        create_persona_judge(rubric="tone", judge="test:j")
    with pytest.raises(PersonagraphError, match="--judge-protocol 'vibes': unknown"):
        create_persona_judge(judge="test:j", protocol="vibes")
    judge = create_persona_judge(judge="test:j")
    with pytest.raises(PersonagraphError, match="inputs: no 'persona'"):
        judge(inputs={"question": QUESTION}, outputs=COWBOY)
    with pytest.raises(PersonagraphError, match="inputs: no 'question'"):
        judge(inputs={"persona": PERSONA}, outputs=COWBOY)
    with pytest.raises(PersonagraphError, match="outputs: expected a string, a message .* keys score"):
        judge(inputs={"persona": PERSONA, "question": QUESTION}, outputs={"score": 3})


class NoNetwork(requests.Session):
    """A LangSmith client's transport that sends nothing and records what it was asked to send."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[tuple[str, str]] = []

    def request(self, method, url, *args, **kwargs):  # type: ignore[override]
        self.asked.append((method, url))
        raise requests.ConnectionError("offline test: nothing leaves this process")


# langsmith calls its offline mode (upload_results=False) beta on every call; that mode is what is tested
@pytest.mark.filterwarnings("ignore:'upload_runs' parameter is in beta")
def test_langsmith_evaluate_offline_returns_personagraphs_scores(monkeypatch) -> None:
    for name in ("LANGSMITH_API_KEY", "LANGCHAIN_API_KEY", "LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2"):
        monkeypatch.delenv(name, raising=False)
    transport = NoNetwork()
    client = Client(api_url="http://langsmith.invalid", session=transport, info=LangSmithInfo())
    dataset = uuid.uuid4()
    examples = [Example(id=uuid.uuid4(), dataset_id=dataset, inputs={"persona": PERSONA, "question": q})
                for q in (QUESTION, "What would you never do?")]

    def agent(inputs: dict) -> dict:
        return {"output": COWBOY if "around" in inputs["question"] else ROBOT}

    judge = create_persona_judge(judge="test:ev-keyword")
    results = evaluate(agent, data=examples, evaluators=[judge, create_async_persona_judge(
        rubric="linguistic_habits", judge="test:ev-keyword")], client=client, upload_results=False)
    rows = {row["example"].inputs["question"]: row["evaluation_results"]["results"] for row in results}
    client.flush()  # whatever the background thread would send, sent now
    assert transport.asked == []
    for question, found in rows.items():
        by_key = {r.key: r for r in found}
        assert set(by_key) == {"persona_consistency", "linguistic_habits"}
        inputs = {"persona": PERSONA, "question": question}
        direct = judge(inputs=inputs, outputs=agent(inputs))
        assert by_key["persona_consistency"].score == direct["score"]
        assert by_key["persona_consistency"].comment == direct["comment"]
        assert by_key["persona_consistency"].metadata["rubric_score"] == direct["metadata"]["rubric_score"]
    assert rows[QUESTION][0].score > 0.8 and {r.key: r.score for r in rows["What would you never do?"]} == {
        "persona_consistency": 0.0, "linguistic_habits": 0.0}


def _cowboy_app(inputs: dict, **kwargs) -> dict:
    reply = ScriptedChatModel(model_name="ev-cowboy").invoke([inputs])
    return {"role": "assistant", "content": f"Well partner, {reply.content}"}


def test_session_judge_in_openevals_run_multiturn_simulation() -> None:
    judge = create_session_judge(judge="test:ev-keyword", persona=PERSONA)
    user = create_llm_simulated_user(system="You are a curious neighbour.",
                                     client=ScriptedChatModel(model_name="ev-user"),
                                     fixed_responses=["Howdy! How do you get around town?"])
    result = run_multiturn_simulation(app=_cowboy_app, user=user, max_turns=3, trajectory_evaluators=[judge])
    assert len(result["trajectory"]) == 6
    (found,) = result["evaluator_results"]
    assert found["key"] == "session_consistency" and found["score"] == 1.0  # 5 on 1–5
    assert found["comment"] == "talks like a cowboy"
    metadata = found["metadata"]
    assert metadata["agent_turns"] == 3 and metadata["breaks"] == [] and metadata["drift_slope"] == 0.0
    assert metadata["task_means"] == {"Persona Consistency": 5.0, "Linguistic Habits": 5.0}
    assert found == judge(outputs=result["trajectory"])  # what the simulation reported is the judge's own


async def test_async_session_judge_finds_the_break() -> None:
    judge = create_async_session_judge(judge="test:ev-keyword", normalize=False)
    answers = iter(["Well partner, the mare.", ROBOT, "Well partner, the pickup."])

    async def app(inputs: dict, **kwargs) -> dict:
        return {"role": "assistant", "content": next(answers)}

    trajectory = [{"role": "system", "content": PERSONA}]  # the persona from the system message
    result = await run_multiturn_simulation_async(
        app=app, user=["How do you travel?", "Are you a bot?", "And in winter?"], max_turns=3,
        trajectory_evaluators=[lambda outputs, reference_outputs=None: judge(outputs=trajectory + outputs)],
    )
    (found,) = result["evaluator_results"]
    metadata = found["metadata"]
    assert found["score"] == 5 and metadata["scale"] == [1, 5]  # on the rubric's scale
    assert [b["turn"] for b in metadata["breaks"]] == [2] and metadata["breaks"][0]["marker"] == "As an AI"
    assert [t["score"] for t in metadata["turn_means"]] == [5.0, 1.0, 5.0]  # the break capped, as in eval


def test_the_langsmith_example_runs_offline(monkeypatch, capsys) -> None:
    """examples/langsmith_evaluate.py, on test models instead of the embedded ones."""
    import importlib
    import sys
    from pathlib import Path

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1]))
    monkeypatch.setenv("PERSONAGRAPH_EXAMPLE_MODEL", "test:ev-cowboy-agent")
    monkeypatch.setenv("PERSONAGRAPH_EXAMPLE_JUDGE", "test:ev-keyword")
    register_script("ev-cowboy-agent", lambda messages, schema: COWBOY)
    monkeypatch.delitem(sys.modules, "examples.langsmith_evaluate", raising=False)
    example = importlib.import_module("examples.langsmith_evaluate")
    transport = NoNetwork()
    client = Client(api_url="http://langsmith.invalid", session=transport, info=LangSmithInfo())
    rows = example.main(client=client)
    client.flush()
    scores = [found.score for row in rows for found in row["evaluation_results"]["results"]]
    assert len(scores) == 4 and all(score > 0.8 for score in scores) and transport.asked == []
    assert "persona_consistency: " in capsys.readouterr().out
