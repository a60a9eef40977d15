"""The top-level Python API: the README's snippet runs as written, one models= list, sync/async twins."""

from __future__ import annotations

import asyncio
import gc
import json
import re
import time
import warnings
from pathlib import Path
from typing import Any

import pytest

import personagraph
from personagraph import PersonagraphError, aevaluate, evaluate
from personagraph.models import Structured
from personagraph.runs import eval as eval_run
from tests.metrics.test_behavior import write_tsv
from tests.metrics.test_longlamp import write_jsonl
from tests.metrics.test_persobench import FAST, write_csv
from tests.runs.test_judge_check import write_items
from tests.runs.test_meta_eval_outcome import write_items as write_rated_items

README = Path(__file__).resolve().parents[1] / "README.md"
CONFIG = {"judges": ["test:judge"], "generator": "test:gen", "environments": 1, "questions_per_task": 1}


def readme_snippet() -> str:
    section = README.read_text(encoding="utf-8").split("## Python API", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)


def test_the_readme_snippet_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(eval_run, "DEFAULT_MODEL", "test:agent")  # the snippet's defaults, as test models
    monkeypatch.setattr(eval_run, "DEFAULT_JUDGE", "test:judge")
    exec(compile(readme_snippet(), "README.md", "exec"), {})
    model, score = capsys.readouterr().out.split()
    assert model == "test:agent" and 1 <= float(score) <= 5
    assert (tmp_path / "runs" / "eval" / "summary.json").is_file()


def test_one_models_list_takes_specs_paths_and_objects(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "api_plugin.py").write_text("def agent(messages):\n    return 'Plugged in.'\n")
    monkeypatch.syspath_prepend(str(tmp_path))

    def howdy(messages: list[dict[str, str]]) -> str:
        return "Howdy, partner."

    summary = evaluate(
        "A 70-year-old retired cowboy from Texas",
        models=["test:agent", "api_plugin:agent", howdy],
        run_dir=tmp_path / "run",
        **CONFIG,
    )
    name = f"{__name__}:test_one_models_list_takes_specs_paths_and_objects.<locals>.howdy"
    assert set(summary.models) == {"test:agent", "api_plugin:agent", name}  # no default model
    assert all(result["persona_score"] is not None for result in summary.models.values())
    assert summary.exit_code == 0 and summary.personas_finished == 1, (summary.failures, summary.incomplete)


def test_a_name_given_twice_and_a_bad_field_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(PersonagraphError, match="models: 'test:agent' is given twice"):
        evaluate("A nurse", models=["test:agent", "test:agent"], run_dir=tmp_path / "a", **CONFIG)
    with pytest.raises(PersonagraphError, match="^questions_per_task: "):
        evaluate(
            "A nurse", models=["test:agent"], run_dir=tmp_path / "b", **CONFIG | {"questions_per_task": 0}
        )


def test_a_misspelt_keyword_is_an_error_not_a_default(tmp_path: Path) -> None:
    with pytest.raises(PersonagraphError, match="^questons_per_task: no such option"):
        evaluate("A nurse", models=["test:agent"], run_dir=tmp_path, questons_per_task=3)


async def test_the_async_twin_resumes_with_no_calls(tmp_path: Path) -> None:
    first = await aevaluate(["A nurse"], models=["test:agent"], run_dir=tmp_path, **CONFIG)
    again = await aevaluate(["A nurse"], models=["test:agent"], run_dir=tmp_path, **CONFIG)
    assert first.llm_calls > 0 and again.llm_calls == 0 and again.models == first.models


def test_the_top_level_names_every_run_kind() -> None:
    for verb in (
        "evaluate",
        "simulate",
        "judge_check",
        "judge_session",
        "meta_evaluate",
        "persobench",
        "longlamp",
        "behavior_alignment",
        "memory_dialogue",
    ):
        assert verb in personagraph.__all__ and f"a{verb}" in personagraph.__all__
        assert getattr(personagraph, verb).__name__ == verb
    assert {"Persona", "Agent", "Summary"} <= set(personagraph.__all__)


SYNC_VERBS = {  # every sync verb but memory_dialogue (tests/memory/test_dialogue_eval.py), test models
    "evaluate": lambda d: personagraph.evaluate("A nurse", models=["test:agent"], run_dir=d / "run",
                                                **CONFIG),
    "meta_evaluate": lambda d: personagraph.meta_evaluate(
        write_rated_items(d / "items.jsonl"), judges=["test:judge"], n_resamples=100, run_dir=d / "run"),
    "judge_check": lambda d: personagraph.judge_check(
        items=str(write_items(d / "items.jsonl")), judges=["test:judge"], generator="test:gen",
        n_resamples=200, run_dir=d / "run"),
    "persobench": lambda d: personagraph.persobench(write_csv(d), model="test:agent", score=FAST,
                                                    run_dir=d / "run"),
    "longlamp": lambda d: personagraph.longlamp(write_jsonl(d), model="test:agent", retriever="recency",
                                                run_dir=d / "run"),
    "behavior_alignment": lambda d: personagraph.behavior_alignment(
        write_tsv(d / "d.tsv"), labeller="test:labeller", system="test:system", n_resamples=100,
        run_dir=d / "run"),
}


@pytest.mark.parametrize("verb", SYNC_VERBS)
async def test_a_sync_verb_runs_inside_a_running_event_loop(verb: str, tmp_path: Path) -> None:
    """A notebook cell runs in an event loop: the sync verb runs there (no ``asyncio.run`` error) and
    leaves no coroutine un-awaited (simulate and judge_session: the judge-objects test, also async)."""
    asyncio.get_running_loop()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        summary = SYNC_VERBS[verb](tmp_path)
        gc.collect()
    assert summary.exit_code == 0, summary.failures
    assert not [w for w in caught if "never awaited" in str(w.message)]


def test_simulate_takes_an_agent_object(tmp_path: Path) -> None:
    summary = personagraph.simulate(
        personagraph.Persona(description="A 70-year-old retired cowboy from Texas"),  # or the plain string
        model=lambda messages: "Well, I reckon so.",
        judges=["test:judge"],
        user_model="test:user",
        turns=2,
        run_dir=tmp_path,
    )
    assert summary.overall["finished"] == 1 and summary.sessions[0]["agent"].endswith("<lambda>")


class FixedJudge:
    """A :class:`~personagraph.Judge` object: every verdict is a 3, and it counts its calls."""

    name = "fixed-judge"

    def __init__(self) -> None:
        self.calls = 0

    async def structured(self, messages: list[dict[str, str]], schema: type, **options: object) -> Structured:
        self.calls += 1
        verdict = {"score": 3, "rationale": "steady", "contradictions": []}
        return Structured(status="ok", value=schema.model_validate(verdict), raw=json.dumps(verdict))


def test_one_judges_list_takes_specs_and_judge_objects(tmp_path: Path) -> None:
    judge = FixedJudge()

    def fours(messages: list[dict[str, str]]) -> str:  # a plug-in-able object: the reply is the verdict
        return '{"score": 4, "rationale": "ok"}'

    options = CONFIG | {"judges": [judge, "test:judge", fours]}
    summary = evaluate("A nurse", models=["test:agent"], run_dir=tmp_path, **options)
    name = f"{__name__}:test_one_judges_list_takes_specs_and_judge_objects.<locals>.fours"
    assert set(summary.per_judge_mean) == {"fixed-judge", "test:judge", name}
    assert summary.per_judge_mean["fixed-judge"] == 3.0 and summary.per_judge_mean[name] == 4.0
    assert judge.calls == summary.verdicts // 3 > 0 and summary.failed_verdicts == 0
    again = evaluate("A nurse", models=["test:agent"], run_dir=tmp_path, **options)
    assert again.llm_calls == 0 and judge.calls == summary.verdicts // 3  # resumed: nothing asked again


async def test_judge_objects_in_every_verb_that_takes_judges(tmp_path: Path) -> None:
    """The sync verbs, called from a running event loop as in a notebook cell."""
    judge = FixedJudge()
    session = personagraph.simulate("A nurse", model="test:agent", user_model="test:user", judges=[judge],
                                     turns=1, run_dir=tmp_path / "simulate")
    assert session.judges == ["fixed-judge"] and set(session.sessions[0]["task_means"].values()) == {3.0}
    calls = judge.calls
    meta = personagraph.meta_evaluate(write_rated_items(tmp_path / "rated.jsonl"), judges=[judge],
                                      n_resamples=100, run_dir=tmp_path / "meta")
    assert meta.exit_code == 0 and judge.calls > calls
    calls = judge.calls
    check = personagraph.judge_check(items=str(write_items(tmp_path / "items.jsonl")), judges=[judge],
                                     generator="test:gen", n_resamples=200, run_dir=tmp_path / "check")
    assert check.exit_code == 0 and check.failures == [] and judge.calls > calls
    calls = judge.calls
    (transcript,) = (tmp_path / "simulate" / "transcripts").glob("*.jsonl")
    judged = personagraph.judge_session(transcript, judges=[judge, "test:judge"], run_dir=tmp_path / "judged")
    assert judged.judges == ["fixed-judge", "test:judge"] and judge.calls > calls
    assert judged.sessions[0]["agent_turns"] == 1 and judged.exit_code == 0


async def test_a_judge_object_must_be_listed_and_cannot_go_to_ray(tmp_path: Path) -> None:
    config = eval_run.EvalConfig(personas=["A nurse"], models=["test:agent"], **CONFIG)
    with pytest.raises(PersonagraphError, match="^judge_objects: 'fixed-judge' is not in judges; list it"):
        await eval_run.run(config, tmp_path / "a", judge_objects=[FixedJudge()])
    with pytest.raises(PersonagraphError, match=r"pass the path instead of the judge object \(fixed-judge\)"):
        await aevaluate("A nurse", models=["test:agent"], run_dir=tmp_path / "b", executor="ray",
                        **CONFIG | {"judges": [FixedJudge()]})
    with pytest.raises(PersonagraphError, match="^generator: the first judge 'fixed-judge' is a judge obj"):
        await aevaluate("A nurse", models=["test:agent"], judges=[FixedJudge()], run_dir=tmp_path / "c")
    with pytest.raises(PersonagraphError, match="^judges: 'fixed-judge' is given twice"):
        await aevaluate("A nurse", judges=[FixedJudge(), FixedJudge()], run_dir=tmp_path / "d")


def _kernel_run(client, code: str, timeout: float) -> tuple[dict, str]:
    """Runs ``code`` in a kernel; returns the execute reply's content and what the cell printed on stderr."""
    msg_id = client.execute(code)
    reply = client.get_shell_msg(timeout=timeout)
    while reply["parent_header"].get("msg_id") != msg_id:
        reply = client.get_shell_msg(timeout=timeout)
    stderr = []
    while True:
        message = client.get_iopub_msg(timeout=10)
        if message["parent_header"].get("msg_id") != msg_id:
            continue
        if message["msg_type"] == "stream" and message["content"]["name"] == "stderr":
            stderr.append(message["content"]["text"])
        if message["msg_type"] == "status" and message["content"]["execution_state"] == "idle":
            return reply["content"], "".join(stderr)


def test_a_notebook_interrupt_stops_a_sync_verb_and_the_same_call_resumes(tmp_path: Path) -> None:
    """In a real Jupyter kernel (a running event loop: the verb runs on a worker thread), the Stop button
    during `evaluate()` against a slow endpoint raises KeyboardInterrupt while the run is still far from done:
    no more requests go out than were in flight. The same call then resumes the run to the end, with the
    default progress bars drawn on the cell's stderr."""
    from jupyter_client.manager import start_new_kernel

    from bench.fake_openai import start_in_thread

    slow = start_in_thread(delay=2.0)
    personas = ["A 70-year-old retired cowboy from Texas", "A pediatric nurse", "A jazz drummer"]
    call = ("evaluate({personas!r}, models=['openai:agent'], judges=['openai:judge'], "
            "generator='openai:gen', environments=1, questions_per_task=1, concurrency=2, api_key='x', "
            "base_url={url!r}, "
            f"run_dir={str(tmp_path / 'run')!r})")
    manager, client = start_new_kernel(cwd=str(tmp_path))
    try:
        reply, _ = _kernel_run(client, "from personagraph import evaluate", timeout=120)
        assert reply["status"] == "ok", reply
        msg_id = client.execute(call.format(personas=personas, url=slow.base_url))
        deadline = time.monotonic() + 60
        while slow.stats().completions < 2:  # the run is under way: its first calls are answered
            assert time.monotonic() < deadline, "the run sent no requests"
            time.sleep(0.1)
        manager.interrupt_kernel()
        sent_at_interrupt = slow.stats().requests_total
        reply = client.get_shell_msg(timeout=15)  # the run's 60+ requests at 2 s, 2 at a time, take 60 s
        assert reply["parent_header"]["msg_id"] == msg_id
        assert reply["content"]["status"] == "error" and reply["content"]["ename"] == "KeyboardInterrupt"
        time.sleep(1)
        assert slow.stats().requests_total <= sent_at_interrupt + 2  # at most those about to be sent
        answered = slow.stats().completions
        slow.server.options.delay = 0.0
        reply, stderr = _kernel_run(client, "summary = " + call.format(personas=personas, url=slow.base_url)
                                    + "\nassert summary.complete, summary",
                                    timeout=120)
        assert reply["status"] == "ok", reply.get("evalue", reply)[-3000:]
        assert "verdicts" in stderr and "answers" in stderr  # the default bars, one per stage
        assert slow.stats().completions - answered < 63  # what finished before the interrupt is kept
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
        slow.stop()


def _graph_agent(reply: str, **compile_options: Any) -> Any:
    """A compiled LangGraph agent that always replies ``reply`` (a plug-in graph takes messages)."""
    from langchain_core.messages import AIMessage
    from langgraph.graph import START, MessagesState, StateGraph

    builder = StateGraph(MessagesState)
    builder.add_node("reply", lambda state: {"messages": [AIMessage(reply)]})
    builder.add_edge(START, "reply")
    return builder.compile(**compile_options)


def test_two_compiled_graphs_are_compared_by_their_names(tmp_path: Path) -> None:
    """Two compiled graphs are both called ``LangGraph``: named by a mapping, by ``compile(name=…)`` or by
    ``with_config(run_name=…)`` they run side by side; unnamed, the error says how to name them."""
    first, second = _graph_agent("Howdy, partner."), _graph_agent("Hello there.")
    hint = r"models: 'LangGraph' is given twice; name each object: models=\{'a': obj_a, 'b': obj_b\}"
    with pytest.raises(PersonagraphError, match=hint + r", graph.compile\(name='a'\)"):
        evaluate("A cowboy", models=[first, second], run_dir=tmp_path / "refused", **CONFIG)
    by_mapping = evaluate("A cowboy", models={"cowboy-graph": first, "plain-graph": second},
                          run_dir=tmp_path / "mapping", on_progress=lambda event: None, **CONFIG)
    assert list(by_mapping.models) == ["cowboy-graph", "plain-graph"] and by_mapping.complete
    named = [_graph_agent("Howdy.", name="compiled-name"), second.with_config(run_name="run-name"),
             "test:agent"]
    by_name = evaluate("A cowboy", models=named, run_dir=tmp_path / "named", on_progress=lambda event: None,
                       **CONFIG)
    assert list(by_name.models) == ["compiled-name", "run-name", "test:agent"] and by_name.complete
    with pytest.raises(PersonagraphError, match="models: 'x': a {name: object} entry names an object"):
        evaluate("A cowboy", models={"x": "test:agent"}, run_dir=tmp_path / "spec", **CONFIG)


def test_a_summary_shows_its_persona_score_table(tmp_path: Path) -> None:
    """A summary as a notebook's last expression (HTML), printed, or drawn by rich is the PersonaScore table
    with its numbers, not a screenful of fields; names in it are escaped."""
    from rich.console import Console

    summary = evaluate("A cowboy", models=[{"<b>bold</b>": lambda messages: "Howdy."}, "test:agent"],
                       run_dir=tmp_path / "run", on_progress=lambda event: None, **CONFIG)
    scores = [f"{summary.models[m]['persona_score']:.2f}" for m in ("<b>bold</b>", "test:agent")]
    page = summary._repr_html_()
    assert "<th>&lt;b&gt;bold&lt;/b&gt;</th>" in page and "<b>bold" not in page
    assert all(f"<td>{score}</td>" in page for score in scores) and "Persona Consistency" in page
    text = repr(summary)
    assert len(text.splitlines()) == 1 + 1 + 8 and len(text) < 800 and str(summary) == text
    assert all(score in text.splitlines()[-3] for score in scores)  # the PersonaScore row
    console = Console(width=80, record=True)
    console.print(summary)
    shown = console.export_text()
    assert "PersonaScore" in shown and scores[1] in shown and "Linguistic Habits" in shown
