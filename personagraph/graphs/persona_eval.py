"""PersonaGym evaluation of one persona as a LangGraph StateGraph.

start (names the persona) → select environments → questions (one branch per task) → answers (per
question × agent) ‖ exemplars (per question) → verdicts (one call per answer × judge) → aggregate. Every
finished item is written to the run store by the node that made it; the graph state carries the same
items for the next step.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Send

from personagraph.agents import Agent
from personagraph.agents.persona import answer_question
from personagraph.environments import generate_questions, load_tasks, select_environments, task_by_name
from personagraph.graphs import live_context
from personagraph.judges.judge import judge_answer, write_exemplars
from personagraph.judges.scoring import score_items
from personagraph.models import ModelClient
from personagraph.schemas import Answer, Exemplars, Persona, Question, Verdict, short_id
from personagraph.store import RunStore

QUESTION_BATCH = "question_batch"
"""Record kind: one per persona × task — status, error, requested count, shortfall, extra calls."""


@dataclass
class EvalContext:
    """What the nodes need besides the state: the store, the agents under test and the role clients."""

    store: RunStore
    agents: list[Agent]
    judges: list[ModelClient]
    env_selector: ModelClient
    question_gen: ModelClient
    exemplar_gen: ModelClient
    environments: int = 5
    shortlist: int = 0
    questions_per_task: int = 2
    judge_protocol: str | None = None  # judges/protocols.py; None: each judge's default
    on_item: Callable[[str], None] = field(default=lambda stage: None)


class EvalState(TypedDict, total=False):
    persona: str
    persona_id: str
    benchmark: dict[str, list[str]] | None
    environments: list[dict[str, Any]]
    questions: Annotated[list[dict[str, Any]], operator.add]
    answers: Annotated[list[dict[str, Any]], operator.add]
    exemplars: Annotated[list[dict[str, Any]], operator.add]
    verdicts: Annotated[list[dict[str, Any]], operator.add]
    errors: Annotated[list[dict[str, Any]], operator.add]


def _ctx(runtime: Runtime[EvalContext]) -> EvalContext:
    return live_context(runtime, EvalContext)


def _task(name: str):  # noqa: ANN202 - a schemas.Task
    task = task_by_name(name)
    assert task is not None, name
    return task


# --- nodes ------------------------------------------------------------------------------------------
async def start(state: EvalState) -> dict[str, Any]:
    """Names the persona when the input gives only its description (a Studio run)."""
    return {} if state.get("persona_id") else {"persona_id": Persona(description=state["persona"]).id}


async def select(state: EvalState, runtime: Runtime[EvalContext]) -> dict[str, Any]:
    ctx = _ctx(runtime)
    selection = await select_environments(ctx.env_selector, state["persona"], ctx.environments, ctx.shortlist)
    record = {
        "persona_id": state["persona_id"],
        "persona": state["persona"],
        "status": selection.status,
        "error": selection.error,
        "environments": [env.model_dump() for env in selection.environments],
        "unknown": selection.unknown,
        "shortlist": selection.shortlist,
        "requested": selection.requested,
        "shortfall": selection.shortfall,
        "extra_calls": selection.extra_calls,
    }
    ctx.store.put("selection", state["persona_id"], record, unit=state["persona_id"])
    ctx.on_item("select")
    update: dict[str, Any] = {"environments": record["environments"]}
    if selection.status != "ok":
        update["errors"] = [{"stage": "select", "error": selection.error}]
    return update


async def load_benchmark(state: EvalState, runtime: Runtime[EvalContext]) -> dict[str, Any]:
    questions = []
    for task_name, texts in (state.get("benchmark") or {}).items():
        for index, text in enumerate(texts):
            question = Question(
                id=short_id(state["persona_id"], task_name, str(index), text),
                persona_id=state["persona_id"], task=task_name, text=text, index=index, source="benchmark",
            )
            _ctx(runtime).store.put("question", question.id, question, unit=state["persona_id"])
            questions.append(question.model_dump())
    return {"questions": questions}


async def write_task_questions(payload: dict[str, Any], runtime: Runtime[EvalContext]) -> dict[str, Any]:
    ctx = _ctx(runtime)
    from personagraph.schemas import Environment

    task = _task(payload["task"])
    environments = [Environment.model_validate(e) for e in payload["environments"]]
    batch = await generate_questions(ctx.question_gen, payload["persona"], task, environments, ctx.questions_per_task)
    questions = []
    for index, text in enumerate(batch.questions):
        question = Question(id=short_id(payload["persona_id"], task.name, str(index), text),
                            persona_id=payload["persona_id"], task=task.name, text=text, index=index)
        ctx.store.put("question", question.id, question, unit=payload["persona_id"])
        questions.append(question.model_dump())
    # one row per task, replaced when a resumed run retries it: a failure or a shortfall is what it says
    ctx.store.put(QUESTION_BATCH, short_id(payload["persona_id"], "questions", task.name),
                  {"persona_id": payload["persona_id"], "task": task.name, "status": "failed" if batch.error else "ok",
                   "error": batch.error, "requested": batch.requested, "shortfall": batch.shortfall,
                   "extra_calls": batch.extra_calls}, unit=payload["persona_id"])
    ctx.on_item("questions")
    update: dict[str, Any] = {"questions": questions}
    if batch.error:
        update["errors"] = [{"stage": "questions", "task": task.name, "error": batch.error}]
    return update


async def answer(payload: dict[str, Any], runtime: Runtime[EvalContext]) -> dict[str, Any]:
    ctx = _ctx(runtime)
    agent = next(a for a in ctx.agents if a.name == payload["agent"])
    result = await answer_question(agent, payload["persona"], Question.model_validate(payload["question"]))
    ctx.store.put("answer", result.id, result, unit=result.persona_id)
    ctx.on_item("answers")
    return {"answers": [result.model_dump()]}


async def exemplars(payload: dict[str, Any], runtime: Runtime[EvalContext]) -> dict[str, Any]:
    ctx = _ctx(runtime)
    question = Question.model_validate(payload["question"])
    result = await write_exemplars(ctx.exemplar_gen, payload["persona"], _task(question.task), question)
    ctx.store.put("exemplars", question.id, result, unit=question.persona_id)
    ctx.on_item("exemplars")
    return {"exemplars": [result.model_dump()]}


async def judge(payload: dict[str, Any], runtime: Runtime[EvalContext]) -> dict[str, Any]:
    ctx = _ctx(runtime)
    client = next(j for j in ctx.judges if j.name == payload["judge"])
    question = Question.model_validate(payload["question"])
    found = payload.get("exemplars")
    verdict = await judge_answer(
        client, payload["persona"], _task(question.task), question, Answer.model_validate(payload["answer"]),
        Exemplars.model_validate(found) if found else None, ctx.judge_protocol,
    )
    ctx.store.put("verdict", verdict.id, verdict, unit=question.persona_id)
    ctx.on_item("verdicts")
    return {"verdicts": [verdict.model_dump()]}


async def aggregate(state: EvalState, runtime: Runtime[EvalContext]) -> dict[str, Any]:
    ctx = _ctx(runtime)
    answers = [Answer.model_validate(a) for a in state.get("answers", [])]
    verdicts = [Verdict.model_validate(v) for v in state.get("verdicts", [])]
    for item in score_items(answers, verdicts):
        ctx.store.put("item_score", item.answer_id, item, unit=item.persona_id)
    ctx.store.put("persona_done", state["persona_id"],
                  {"persona_id": state["persona_id"], "errors": state.get("errors", [])},
                  unit=state["persona_id"])
    return {}


# --- routing ----------------------------------------------------------------------------------------
# async like the nodes (and _join): LangGraph runs a sync graph function in a worker thread, a hop per call
async def route_start(state: EvalState) -> str:
    return "load_benchmark" if state.get("benchmark") else "select"


async def fan_out_tasks(state: EvalState) -> list[Send] | str:
    if not state.get("environments"):
        return "aggregate"
    return [
        Send("write_task_questions", {"persona": state["persona"], "persona_id": state["persona_id"],
                                      "task": task.name, "environments": state["environments"]})
        for task in load_tasks()
    ]


async def fan_out_answers(state: EvalState, runtime: Runtime[EvalContext]) -> list[Send] | str:
    questions = state.get("questions", [])
    if not questions:
        return "aggregate"
    sends = [Send("exemplars", {"persona": state["persona"], "question": q}) for q in questions]
    sends += [
        Send("answer", {"persona": state["persona"], "question": q, "agent": agent.name})
        for q in questions
        for agent in _ctx(runtime).agents
    ]
    return sends


async def fan_out_judges(state: EvalState, runtime: Runtime[EvalContext]) -> list[Send] | str:
    questions = {q["id"]: q for q in state.get("questions", [])}
    exemplar_sets = {e["question_id"]: e for e in state.get("exemplars", [])}
    sends = [
        Send("judge", {"persona": state["persona"], "question": questions[a["question_id"]], "answer": a,
                       "exemplars": exemplar_sets.get(a["question_id"]), "judge": j.name})
        for a in state.get("answers", [])
        if a["status"] == "ok"
        for j in _ctx(runtime).judges
    ]
    return sends or "aggregate"


async def _join(state: EvalState) -> dict[str, Any]:
    return {}


def build_graph(context_schema: type = EvalContext) -> StateGraph:
    """The uncompiled PersonaGym graph (compile it with a checkpointer to make it resumable).

    ``context_schema``: what runs pass as ``context``: an EvalContext, or settings that build one
    (``personagraph.studio``, for ``langgraph dev``).
    """
    graph = StateGraph(EvalState, context_schema=context_schema)
    graph.add_node("start", start)
    graph.add_node("select", select)
    graph.add_node("load_benchmark", load_benchmark)
    graph.add_node("write_task_questions", write_task_questions)
    graph.add_node("questions_done", _join)
    graph.add_node("answer", answer)
    graph.add_node("exemplars", exemplars)
    graph.add_node("answers_done", _join)
    graph.add_node("judge", judge)
    graph.add_node("aggregate", aggregate)

    graph.add_edge(START, "start")
    graph.add_conditional_edges("start", route_start, ["select", "load_benchmark"])
    graph.add_conditional_edges("select", fan_out_tasks, ["write_task_questions", "aggregate"])
    graph.add_edge("write_task_questions", "questions_done")
    graph.add_edge("load_benchmark", "questions_done")
    graph.add_conditional_edges("questions_done", fan_out_answers, ["answer", "exemplars", "aggregate"])
    graph.add_edge("answer", "answers_done")
    graph.add_edge("exemplars", "answers_done")
    graph.add_conditional_edges("answers_done", fan_out_judges, ["judge", "aggregate"])
    graph.add_edge("judge", "aggregate")
    graph.add_edge("aggregate", END)
    return graph

