"""Persona tests in pytest (the personagraph plugin is registered by the package: no conftest needed).

    .venv/bin/python -m pytest examples/test_persona_example.py                  # embedded models, offline
    .venv/bin/python -m pytest examples/test_persona_example.py --personagraph-judge openai:gpt-4o

Not collected by the project's own suite (``testpaths = ["tests"]``). Each assertion is cached in
``.personagraph/`` under the rootdir: run it again unchanged and it makes 0 LLM calls.
"""

from personagraph.testing import assert_persona

COWBOY = "A 70-year-old retired cowboy from Texas"


def test_the_cowboy_keeps_his_persona():
    assert_persona("examples.function_agent:agent", COWBOY, min_score=4, tasks={"persona consistency": 4})


def test_the_cowboy_holds_up_in_a_conversation(personagraph):
    personagraph.assert_session("examples.function_agent:async_agent", COWBOY, turns=3, min_consistency=4)
