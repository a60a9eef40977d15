"""PersonaGym evaluation of one persona as a LangGraph StateGraph.

start (names the persona) → select environments → one branch per task: its questions, then per question
its exemplars ‖ every agent's answer, each answer judged as soon as it and the exemplars are in →
aggregate. Every finished item is written to the run store by the node that made it; the graph state
carries the same items for the next step. ``aggregate`` puts the persona's scores in the final state
(``scores``: per model and task, PersonaScore with its CI, refusal rate, and the failed items), computed
by :func:`~personagraph.judges.scoring.summarize_scores` as the run's ``summary.json`` is, so a Studio
run shows the result it reports.

Why a task is one node and not stages (questions, then answers ‖ exemplars, then verdicts): LangGraph runs
supersteps, so a stage barrier makes every task wait for the slowest of the persona: every answer for the
last task's questions, every verdict for the slowest exemplar (docs/benchmarks.md#quick-run). Inside one
node the calls still run concurrently and the model layer's cache still makes a resumed node repeat no
finished call; the graph keeps its dependent round trips (select → questions → answers ‖ exemplars →
verdicts), each task's chain running at its own pace.
"""

from __future__ import annotations

import asyncio
import operator
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Annotated, Any, Literal, TypeVar

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Send
from typing_extensions import TypedDict  # Studio reads typing's only on Python ≥ 3.12

from personagraph.agents import Agent
from personagraph.agents.persona import answer_question
from personagraph.environments import generate_questions, load_tasks, select_environments, task_by_name
from personagraph.graphs import live_context
from personagraph.judges.judge import judge_answer, write_exemplars
from personagraph.judges.scoring import NonAnswers, ScoreKind, score_items, summarize_scores
from personagraph.models import ModelClient
from personagraph.runs.base import FailedItem
from personagraph.schemas import (
    TASK_NAMES,
    Answer,
    Environment,
    Exemplars,
    Persona,
    Question,
    Task,
    Verdict,
    short_id,
)
from personagraph.store import RunStore

T = TypeVar("T")
QUESTION_BATCH = "question_batch"
"""Record kind: one per persona × task — status, error, requested count, shortfall, extra calls."""


@dataclass(frozen=True)
class Scoring:
    """How the scores are computed (the run config's fields of the same names): the options of
    :func:`~personagraph.judges.scoring.summarize_scores` besides the answers, verdicts and tasks."""

    judges: list[str]
    seed: int = 0
    score_kind: ScoreKind = "expected"
    non_answers: NonAnswers = "minimum"
    samples: int = 1
    pass_threshold: float = 4


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
    exemplars: bool = True  # write exemplars: only when a judge's protocol reads them (protocols.PROTOCOLS)
    # who else answers each question, with the sample index of its answer: the agents' samples 1 .. K-1
    # (``eval --samples K``; each agent here samples with its own seed) and the control arms (sample 0)
    extra_answerers: list[tuple[Agent, int]] = field(default_factory=list)
    scoring: Scoring | None = None  # None: the judges' names, and the defaults
    on_item: Callable[[str], None] = field(default=lambda stage: None)
    # once every item of a persona is stored (``aggregate``): a Studio run records it as ``eval`` does
    on_persona_done: Callable[[Persona], None] = field(default=lambda persona: None)
    # the persona's scores in the final state (what a Studio run shows); off in a batch run, whose summary
    # is built from the store once, at its end
    persona_scores: bool = True


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
    scores: dict[str, Any]  # the persona's scores and failed items (``aggregate``; not in a batch run)


class EvalInput(TypedDict):
    """What a person gives a run (Studio's input form): the persona to evaluate, as free text."""

    persona: str


class EvalOutput(TypedDict, total=False):
    """What a run returns to a person: the persona's id and its scores (per model and task, PersonaScore,
    refusal rate, failed items)."""

    persona_id: str
    scores: dict[str, Any]


def _ctx(runtime: Runtime[EvalContext]) -> EvalContext:
    return live_context(runtime, EvalContext)


def _task(name: str) -> Task:
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


async def evaluate_task(payload: dict[str, Any], runtime: Runtime[EvalContext]) -> dict[str, Any]:
    """One task: its questions (written by the question writer, or the benchmark's), then every question
    evaluated at once (:func:`_evaluate_question`)."""
    ctx = _ctx(runtime)
    task = _task(payload["task"])
    if "benchmark" in payload:
        questions = _store_questions(ctx, payload["persona_id"], task, payload["benchmark"], "benchmark")
        update: dict[str, Any] = {}
    else:
        questions, update = await _write_questions(ctx, payload, task)
    results = await _all_or_none([asyncio.ensure_future(_evaluate_question(ctx, payload["persona"], q))
                                  for q in questions])
    return {**update,
            "questions": [q.model_dump() for q in questions],
            "exemplars": [e for exemplars, _, _ in results for e in exemplars],
            "answers": [a for _, answers, _ in results for a in answers],
            "verdicts": [v for _, _, verdicts in results for v in verdicts]}


def _store_questions(ctx: EvalContext, persona_id: str, task: Task, texts: list[str],
                     source: Literal["generated", "benchmark"]) -> list[Question]:
    """The task's questions, each stored as it is made."""
    questions = []
    for index, text in enumerate(texts):
        question = Question(id=short_id(persona_id, task.name, str(index), text), persona_id=persona_id,
                            task=task.name, text=text, index=index, source=source)
        ctx.store.put("question", question.id, question, unit=persona_id)
        questions.append(question)
    return questions


async def _write_questions(
    ctx: EvalContext, payload: dict[str, Any], task: Task
) -> tuple[list[Question], dict[str, Any]]:
    environments = [Environment.model_validate(e) for e in payload["environments"]]
    batch = await generate_questions(ctx.question_gen, payload["persona"], task, environments,
                                     ctx.questions_per_task)
    persona_id = payload["persona_id"]
    questions = _store_questions(ctx, persona_id, task, batch.questions, "generated")
    # one row per task, replaced when a resumed run retries it: a failure or a shortfall is what it says
    ctx.store.put(QUESTION_BATCH, short_id(persona_id, "questions", task.name),
                  {"persona_id": persona_id, "task": task.name, "status": "failed" if batch.error else "ok",
                   "error": batch.error, "requested": batch.requested, "shortfall": batch.shortfall,
                   "extra_calls": batch.extra_calls}, unit=persona_id)
    ctx.on_item("questions")
    return questions, ({"errors": [{"stage": "questions", "task": task.name, "error": batch.error}]}
                       if batch.error else {})


async def _evaluate_question(
    ctx: EvalContext, persona: str, question: Question
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """One question: exemplars (when a judge reads them) ‖ every agent's answer; each ok answer judged by
    every judge once the exemplars are in (a failed or empty answer is not judged: scoring counts it as
    the minimum). Returns the exemplars, answers and verdicts as state items."""
    task = _task(question.task)
    exemplar_set = asyncio.ensure_future(_exemplars(ctx, persona, task, question) if ctx.exemplars
                                         else _none())
    answerers = [(agent, 0) for agent in ctx.agents] + ctx.extra_answerers
    branches = [asyncio.ensure_future(_answer_and_judge(ctx, persona, task, question, agent, sample,
                                                        exemplar_set))
                for agent, sample in answerers]
    await _all_or_none([exemplar_set, *branches])
    answers = [branch.result()[0] for branch in branches]
    verdicts = [verdict for branch in branches for verdict in branch.result()[1]]
    written = exemplar_set.result()
    return ([written.model_dump()] if written else [], [a.model_dump() for a in answers],
            [v.model_dump() for v in verdicts])


async def _all_or_none(futures: list[asyncio.Future[T]]) -> list[T]:
    """Every future's result; when one raises (an error that stops the run) or the caller is cancelled,
    the others are cancelled first, so nothing is left sending calls."""
    try:
        return await asyncio.gather(*futures)
    except BaseException:
        for pending in futures:
            pending.cancel()
        raise


async def _none() -> None:
    return None


async def _exemplars(ctx: EvalContext, persona: str, task: Task, question: Question) -> Exemplars:
    result = await write_exemplars(ctx.exemplar_gen, persona, task, question)
    ctx.store.put("exemplars", question.id, result, unit=question.persona_id)
    ctx.on_item("exemplars")
    return result


async def _answer_and_judge(
    ctx: EvalContext, persona: str, task: Task, question: Question, agent: Agent, sample: int,
    exemplar_set: asyncio.Future[Exemplars | None],
) -> tuple[Answer, list[Verdict]]:
    answer = await answer_question(agent, persona, question, sample)
    ctx.store.put("answer", answer.id, answer, unit=answer.persona_id)
    ctx.on_item("answers")
    if answer.status != "ok":
        return answer, []
    found = await asyncio.shield(exemplar_set)  # shared by every agent's branch: one may not cancel it
    verdicts = await asyncio.gather(*(_judge(ctx, client, persona, task, question, answer, found)
                                      for client in ctx.judges))
    return answer, list(verdicts)


async def _judge(
    ctx: EvalContext, client: ModelClient, persona: str, task: Task, question: Question, answer: Answer,
    exemplar_set: Exemplars | None,
) -> Verdict:
    verdict = await judge_answer(client, persona, task, question, answer, exemplar_set, ctx.judge_protocol)
    ctx.store.put("verdict", verdict.id, verdict, unit=question.persona_id)
    ctx.on_item("verdicts")
    return verdict


async def aggregate(state: EvalState, runtime: Runtime[EvalContext]) -> dict[str, Any]:
    ctx = _ctx(runtime)
    answers = [Answer.model_validate(a) for a in state.get("answers", [])]
    verdicts = [Verdict.model_validate(v) for v in state.get("verdicts", [])]
    for item in score_items(answers, verdicts):
        ctx.store.put("item_score", item.answer_id, item, unit=item.persona_id)
    ctx.store.put("persona_done", state["persona_id"],
                  {"persona_id": state["persona_id"], "errors": state.get("errors", [])},
                  unit=state["persona_id"])
    ctx.on_persona_done(Persona(description=state["persona"]))
    return {"scores": persona_scores(ctx, state, answers, verdicts)} if ctx.persona_scores else {}


def persona_scores(
    ctx: EvalContext, state: EvalState, answers: list[Answer], verdicts: list[Verdict]
) -> dict[str, Any]:
    """The persona's scores as ``summary.json`` has a run's (``models``, ``score_kind``, ``per_judge_mean``,
    …) for the agents under test, and its ``failures`` (stage, item, model, reason)."""
    scoring = ctx.scoring or Scoring(judges=[judge.name for judge in ctx.judges])
    tested = {agent.name for agent in ctx.agents}
    answers = sorted((a for a in answers if a.model in tested), key=lambda a: a.id)  # as build_summary
    ids = {a.id for a in answers}
    verdicts = sorted((v for v in verdicts if v.answer_id in ids), key=lambda v: v.id)
    tasks = set(state["benchmark"]) if state.get("benchmark") else TASK_NAMES
    pid = state["persona_id"]
    failures = [FailedItem(stage=e["stage"], item=f"{pid}/{e['task']}" if e.get("task") else pid,
                           model=(ctx.question_gen if e.get("task") else ctx.env_selector).name,
                           reason=e.get("error")) for e in state.get("errors", [])]
    failures += [FailedItem(stage="exemplars", item=e["question_id"], model=ctx.exemplar_gen.name,
                            reason=e.get("error"))
                 for e in state.get("exemplars", []) if e.get("status", "ok") != "ok"]
    failures += [FailedItem(stage="answers", item=a.id, model=a.model, reason=a.error)
                 for a in answers if a.status != "ok"]
    failures += [FailedItem(stage="verdicts", item=v.id, model=v.judge, reason=v.error)
                 for v in verdicts if v.status != "ok"]
    return {**summarize_scores(answers, verdicts, tasks=tasks, **asdict(scoring)),
            "failures": [f.model_dump(mode="json") for f in failures]}


# --- routing ----------------------------------------------------------------------------------------
# async like the nodes: LangGraph runs a sync graph function in a worker thread, a hop per call
async def fan_out_tasks(state: EvalState) -> list[Send] | str:
    """One branch per task: the benchmark's questions when the input has them, else questions written for
    the selected environments (none selected: nothing to ask)."""
    persona = {"persona": state["persona"], "persona_id": state["persona_id"]}
    if state.get("benchmark"):
        return [Send("evaluate_task", {**persona, "task": task, "benchmark": texts})
                for task, texts in state["benchmark"].items()]
    if not state.get("environments"):
        return "aggregate"
    return [Send("evaluate_task", {**persona, "task": task.name, "environments": state["environments"]})
            for task in load_tasks()]


async def route_start(state: EvalState) -> list[Send] | str:
    return await fan_out_tasks(state) if state.get("benchmark") else "select"


def build_graph(
    context_schema: type = EvalContext, input_schema: type | None = None, output_schema: type | None = None
) -> StateGraph:
    """The uncompiled PersonaGym graph (compile it with a checkpointer to make it resumable).

    ``context_schema``: what runs pass as ``context``: an EvalContext, or settings that build one
    (``personagraph.studio``, for ``langgraph dev``); ``input_schema``/``output_schema``: what a run takes and
    returns (default: the whole state; Studio's form asks for the input schema's fields).
    """
    graph = StateGraph(EvalState, context_schema=context_schema, input_schema=input_schema or EvalState,
                       output_schema=output_schema or EvalState)
    graph.add_node("start", start)
    graph.add_node("select", select)
    graph.add_node("evaluate_task", evaluate_task)
    graph.add_node("aggregate", aggregate)

    graph.add_edge(START, "start")
    graph.add_conditional_edges("start", route_start, ["select", "evaluate_task"])
    graph.add_conditional_edges("select", fan_out_tasks, ["evaluate_task", "aggregate"])
    graph.add_edge("evaluate_task", "aggregate")
    graph.add_edge("aggregate", END)
    return graph
