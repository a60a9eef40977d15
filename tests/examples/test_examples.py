"""Each example plug-in loads through ``--agent examples.<module>:<attr>`` and answers offline."""

from __future__ import annotations

import pytest

from personagraph.agents.plugin import load_agent
from personagraph.models.testing import register_script

PERSONA = "A 70-year-old retired cowboy from Texas"
CONVERSATION = [{"role": "user", "content": "What's the weather like on the ranch today?"}]

EXAMPLES = [
    ("examples.function_agent:agent", "function"),
    ("examples.function_agent:async_agent", "function"),
    ("examples.chat_model_agent:model", "chat_model"),
    ("examples.react_agent:graph", "graph"),
    ("examples.system_prompt_agent:agent", "agent"),
    ("examples.system_prompt_agent:chain", "runnable"),
]


@pytest.mark.parametrize(("path", "kind"), EXAMPLES)
async def test_example_loads_and_answers(examples_env, path, kind):
    agent = load_agent(path)
    assert agent.kind == kind and agent.name == path
    reply = await agent.respond(PERSONA, CONVERSATION)
    assert reply.ok, reply.error
    assert reply.text.strip()


async def test_react_agent_uses_its_tool(examples_env, monkeypatch):
    seen = []

    def script(messages, schema):
        seen.append(messages)
        last = messages[-1]["content"]
        if last.startswith("OBSERVATION:"):
            return f"Well partner, the almanac says: {last.removeprefix('OBSERVATION: ')}"
        return "ACTION: almanac: weather"

    register_script("react-example", script)
    monkeypatch.setenv("PERSONAGRAPH_EXAMPLE_MODEL", "test:react-example")
    reply = await load_agent("examples.react_agent:graph").respond(PERSONA, CONVERSATION)
    assert reply.ok and "97°F" in reply.text
    assert "ACTION" not in reply.text
    assert (
        seen[0][0]["role"] == "system"
        and PERSONA in seen[0][0]["content"]
        and "almanac" in seen[0][0]["content"]
    )


async def test_react_agent_stops_calling_tools(examples_env, monkeypatch):
    register_script("react-loop", lambda messages, schema: "ACTION: almanac: weather")
    monkeypatch.setenv("PERSONAGRAPH_EXAMPLE_MODEL", "test:react-loop")
    reply = await load_agent("examples.react_agent:graph").respond(PERSONA, CONVERSATION)
    assert not reply.ok and "empty reply" in reply.error  # only tool calls, never an answer: a failed turn


async def test_system_prompt_agent_uses_its_own_prompt(examples_env, monkeypatch):
    seen = []
    register_script("sp-example", lambda messages, schema: seen.append(messages) or "Howdy.")
    monkeypatch.setenv("PERSONAGRAPH_EXAMPLE_MODEL", "test:sp-example")
    await load_agent("examples.system_prompt_agent:agent").respond(PERSONA, CONVERSATION)
    await load_agent("examples.system_prompt_agent:chain").respond(PERSONA, CONVERSATION)
    own, chained = seen[0][0]["content"], seen[1][0]["content"]
    assert own.startswith(f"You are {PERSONA}.\nStay in character") and "closely mirror" not in own
    assert "closely mirror" in chained and "House rules" in chained


async def test_function_agent_sees_the_persona(examples_env):
    from personagraph.agents.plugin import resolve

    persona_of = resolve("examples.function_agent:persona_of")
    assert PERSONA in persona_of([{"role": "system", "content": f"You are {PERSONA}."}, *CONVERSATION])


# Runs a module as `python -m` does, with the network blocked: every connection and name lookup that
# leaves the machine fails and is listed on stderr at exit (loopback stays open: embedded models use it).
NO_NETWORK = """
import atexit, ipaddress, runpy, socket, sys
tried = []
def local(host):
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"
connect, resolve = socket.socket.connect, socket.getaddrinfo
def guarded_connect(self, address, *args):
    if self.family in (socket.AF_INET, socket.AF_INET6) and not local(address[0]):
        tried.append(f"connect {address[0]}")
        raise OSError(101, "network blocked by the test")
    return connect(self, address, *args)
def guarded_resolve(host, *args, **kwargs):
    if host and not local(str(host)):
        tried.append(f"resolve {host}")
        raise socket.gaierror(-2, "network blocked by the test")
    return resolve(host, *args, **kwargs)
socket.socket.connect, socket.getaddrinfo = guarded_connect, guarded_resolve
atexit.register(lambda: print("network:", tried, file=sys.stderr))
sys.argv = [sys.argv[1]]
runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
"""


def test_the_offline_langsmith_example_opens_no_connection(tmp_path) -> None:
    """`python -m examples.langsmith_evaluate`, labelled offline, runs as written with the network blocked
    (LangSmith's default client would ask its server for settings) and prints its scores."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LANGSMITH_", "LANGCHAIN_"))}
    env.update(PERSONAGRAPH_EXAMPLE_MODEL="test:agent", PERSONAGRAPH_EXAMPLE_JUDGE="test:judge",
               PYTHONPATH=str(root))
    done = subprocess.run([sys.executable, "-c", NO_NETWORK, "examples.langsmith_evaluate"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("persona_consistency: ") == 2 and done.stdout.count("linguistic_habits: ") == 2
    assert "network: []" in done.stderr, done.stderr[-3000:]
