"""The top-level Python API: the README's snippet runs as written, one models= list, sync/async twins."""

from __future__ import annotations

import asyncio
import gc
import json
import re
import warnings
from pathlib import Path

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
