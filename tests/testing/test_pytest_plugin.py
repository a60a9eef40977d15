"""The pytest plugin as a user meets it: a throwaway project (pytester) with persona tests against test
agents (and the pytest example), no conftest of ours. It passes; the same run again makes 0 LLM calls; a
worse agent fails with a message naming the task and quoting its lowest-scored answer; a changed agent is
evaluated afresh."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from personagraph.models.spec import DEFAULT_JUDGE, DEFAULT_MODEL
from personagraph.testing import Options, PersonaTester, identity

pytest_plugins = ["pytester"]

PERSONA = "A 70-year-old retired cowboy from Texas"

ROOT = Path(__file__).resolve().parents[2]

# A judge that rewards cowboy talk: 5 when the judged text says "partner", else 2, in whichever verdict
# schema it is asked (the turn rubric's, the session verdict's); other replies (the generator's
# environments and questions) are the default test model's.
JUDGE = '''
import json
from personagraph.models.testing import register_script, reply

def keyword_judge(messages, schema):
    if not schema or "score" not in schema.get("properties", {}):
        return reply("default", messages, {"schema": schema} if schema else None)
    good = "partner" in messages[-1]["content"]
    verdict = {"rationale": "talks like a cowboy" if good else "could be anyone", "score": 5 if good else 2}
    if "contradictions" in schema["properties"]:
        verdict["contradictions"] = []
    return json.dumps(verdict)

register_script("keyword", keyword_judge)
register_script("cowboy", lambda messages, schema: "Well partner, I saddle up and ride out at dawn.")
'''

AGENTS = '''
def cowboy(messages):
    return "Well partner, I saddle up my horse and ride out at dawn."

async def async_cowboy(messages):
    return "Howdy partner, the old truck does fine when the mare is tired."

def robot(messages):
    return "As an AI language model, I do not have personal experiences."
'''

TESTS = f'''
import conftest_judge  # registers test:keyword and test:cowboy
from my_agents import cowboy, robot
from personagraph.testing import assert_persona, assert_session

PERSONA = {PERSONA!r}
FAST = {{"judges": ["test:keyword"], "generator": "test:gen", "shortlist": 0}}

def test_function_agent():
    assert_persona(cowboy, PERSONA, min_score=4, **FAST)

def test_plugin_path_and_task_minimums():
    assert_persona("my_agents:async_cowboy", PERSONA, tasks={{"persona consistency": 4}}, **FAST)

def test_model_spec_through_the_fixture(personagraph):
    summary = personagraph.assert_persona("test:cowboy", PERSONA, min_score=4, **FAST)
    assert summary.models["test:cowboy"]["persona_score"] >= 4

def test_agent_and_judge_from_the_command_line():
    summary = assert_persona(None, PERSONA, generator="test:gen", shortlist=0)
    assert list(summary.models) == ["test:cowboy"] and summary.judge_agreement["judges"] == ["test:keyword"]

async def test_async_session(personagraph):
    await personagraph.aassert_session("my_agents:async_cowboy", PERSONA, turns=2, min_consistency=4,
                                       user_model="test:user", judges=["test:keyword"])

def test_robot():
    assert_persona(robot, PERSONA, min_score=4, **FAST)

def test_robot_session():
    assert_session(robot, PERSONA, turns=2, user_model="test:user", judges=["test:keyword"])
'''
OPTIONS = ("--personagraph-judge", "test:keyword", "--personagraph-model", "test:cowboy",
           "--personagraph-user", "test:user")


def _project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """The throwaway project: our persona tests and the pytest example (examples/test_persona_example.py,
    its agent on the test model ``test:cowboy``, imported from the repository root)."""
    pytester.makeini("[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n")
    example = (ROOT / "examples" / "test_persona_example.py").read_text()
    pytester.makepyfile(conftest_judge=JUDGE, my_agents=AGENTS, test_persona=TESTS,
                        test_persona_example="import conftest_judge\n" + example)
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.setenv("PERSONAGRAPH_EXAMPLE_MODEL", "test:cowboy")


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """pytest in the project, in its own process as a user runs it: an in-process run would drop the
    modules it imported (torch among them) from sys.modules afterwards, and a native extension imported
    a second time crashes the process."""
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *OPTIONS, *args)


def _llm_calls(root: Path) -> dict[str, int]:
    """LLM calls per run directory of the project's persona tests, from their summaries."""
    return {str(path.parent.relative_to(root)): json.loads(path.read_text())["llm_calls"]
            for path in sorted((root / ".personagraph").glob("*/*/summary.json"))}


def test_persona_tests_pass_then_cost_nothing_and_a_worse_agent_fails(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    _project(pytester, monkeypatch)
    first = _run(pytester)
    first.assert_outcomes(passed=7, failed=2)
    calls = _llm_calls(pytester.path)
    assert len(calls) == 9 and all(n > 0 for n in calls.values()), calls

    failure = first.stdout.str()
    # eval: the failing tasks named, the lowest-scored answer quoted with the judge's (capped) verdict
    assert "my_agents:robot as 'A 70-year-old retired cowboy from Texas': PersonaScore 1.20 < 4" in failure
    assert "failing tasks: Expected Action 1.00 < 4" in failure and "Persona Consistency 1.00 < 4" in failure
    assert "A: As an AI language model, I do not have personal experiences." in failure
    assert "test:keyword: 1 (judge said 2; capped: As an AI) — could be anyone" in failure
    # each failure's report once (pytest repeats whole messages in its short summary when CI is set)
    reports = {line.split("report: ", 1)[1].strip() for line in failure.splitlines() if "report: " in line}
    assert len(reports) == 2 and all(Path(r).is_file() and Path(r).suffix == ".html" for r in reports)
    for report in map(Path, reports):  # under 1 MB: the plotting library is one shared file beside them
        page = report.read_text(encoding="utf-8")
        (library,) = re.findall(r'<script type="text/javascript" src="([^"]+)"></script>', page)
        assert report.stat().st_size < 1_000_000 and (report.parent / library).is_file()
        assert (report.parent / library).resolve().parent == pytester.path / ".personagraph" / "assets"
    # simulate: the session named with its consistency and the judge's rationale, the first break
    assert "(my_agents:robot as 'A 70-year-old retired cowboy from Texas'): consistency 2.00 < 4.0" in failure
    assert "test:keyword: 2 — could be anyone" in failure
    assert "first break: turn 1 (refusal_marker: 'As an AI')" in failure
    assert (pytester.path / ".personagraph" / ".gitignore").read_text().strip().endswith("*")

    second = _run(pytester)
    second.assert_outcomes(passed=7, failed=2)
    assert set(_llm_calls(pytester.path).values()) == {0}
    second.stdout.fnmatch_lines(["personagraph: 9 persona run(s), 0 LLM call(s), 9 fully cached*"])
    assert "PersonaScore 1.20 < 4" in second.stdout.str()  # the same verdict, from the cache

    changed = AGENTS.replace("ride out at dawn", "ride out before sunup").replace("does fine", "runs fine")
    pytester.makepyfile(my_agents=changed)  # the object and the module:attr agent, both with other code
    third = _run(pytester, "-k", "function_agent or plugin_path")
    third.assert_outcomes(passed=2, deselected=7)
    third.stdout.fnmatch_lines(["personagraph: 2 persona run(s), * LLM call(s), 0 fully cached*"])


def test_offline_puts_every_api_model_on_the_embedded_models(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "openai_bot.py").write_text("def agent(messages):\n    return 'Howdy partner.'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    tester = PersonaTester("t.py::test", tmp_path, Options(judges=("openai:gpt-4o",), offline=True))
    call, _ = tester._eval_call("openai@vllm:qwen", PERSONA, ["openai:gpt-4o", "openai:o3", "test:j"], True,
                                None, {"generator": "openai:gpt-4o"})
    assert call["models"] == [DEFAULT_MODEL] and call["judges"] == [DEFAULT_JUDGE, "test:j"]
    assert call["generator"] == DEFAULT_JUDGE
    call, _ = tester._eval_call("openai_bot:agent", PERSONA, None, True, None, {})
    assert call["models"] == ["openai_bot:agent"] and call["judges"] == [DEFAULT_JUDGE]  # a plug-in stays
    online = PersonaTester("t.py::test", tmp_path, Options(judges=("openai:gpt-4o",)))
    call, _ = online._eval_call("openai_bot:agent", PERSONA, None, True, None, {"generator": "openai:gpt-4o"})
    assert call["judges"] == ["openai:gpt-4o"] and call["generator"] == "openai:gpt-4o"


def test_run_dirs_are_keyed_by_test_agent_and_config(tmp_path: Path) -> None:
    def cowboy(messages):
        return "Well partner."

    first_source = identity(cowboy)

    def cowboy(messages):  # noqa: F811 - the same name, other code: another identity
        return "Howdy partner."

    assert identity(cowboy) != first_source and identity("test:a") == "test:a"
    tester = PersonaTester("t.py::test_a", tmp_path)
    _, base = tester._eval_call("test:a", PERSONA, None, True, None, {})
    assert base.parent == tmp_path / ".personagraph" / "t.py_test_a"
    assert tester._eval_call("test:a", PERSONA, None, True, None, {})[1] == base
    assert tester._eval_call("test:b", PERSONA, None, True, None, {})[1] != base
    assert tester._eval_call("test:a", PERSONA, None, True, None, {"seed": 1})[1] != base
    other_test = PersonaTester("t.py::test_b", tmp_path)
    assert other_test._eval_call("test:a", PERSONA, None, True, None, {})[1] != base


def test_samples_pass_through_to_evaluate(tmp_path: Path) -> None:
    """``samples=K`` is evaluate's: K answers per question, pass^K in the summary (and in the cache key)."""
    exec(JUDGE, {})  # registers test:keyword and test:cowboy

    def cowboy(messages):
        return "Well partner, I saddle up my horse and ride out at dawn."

    tester = PersonaTester("t.py::test_samples", tmp_path)
    summary = tester.assert_persona(cowboy, PERSONA, samples=2, judges=["test:keyword"], generator="test:gen",
                                    shortlist=0)
    (result,) = summary.models.values()
    assert result["samples"]["k"] == 2 and result["samples"]["pass_k"] == 1.0
    assert tester._eval_call(cowboy, PERSONA, None, True, 2, {})[1] != tester._eval_call(
        cowboy, PERSONA, None, True, None, {})[1]


def test_the_summary_line_counts_the_runs_of_every_xdist_worker(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under ``pytest -n 2`` the tests run in two workers: the controller's summary line adds them up."""
    pytest.importorskip("xdist")
    _project(pytester, monkeypatch)
    result = _run(pytester, "-n", "2", "-k", "function_agent or plugin_path or robot_session")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["personagraph: 3 persona run(s), * LLM call(s), 0 fully cached*"])
