"""The plug-in adapter: every accepted kind, the persona system prompt, failures as values, clear errors."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableLambda
from langgraph.graph import END, START, MessagesState, StateGraph

from personagraph.agents import Agent, PersonaAgent
from personagraph.agents.plugin import PluginAgent, adapt, detect_kind, load_agent
from personagraph.errors import PersonagraphError
from personagraph.models import Completion, ModelClient
from personagraph.models.testing import ScriptedChatModel

PERSONA = "A 70-year-old retired cowboy from Texas"
CONVERSATION = [{"role": "user", "content": "Where did you grow up?"}]


def _echo_graph():
    def node(state: MessagesState) -> dict:
        system = state["messages"][0].content
        return {"messages": [AIMessage(content=f"graph saw: {system[:40]}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("reply", node)
    builder.add_edge(START, "reply")
    builder.add_edge("reply", END)
    return builder


def sync_fn(messages):
    return f"sync saw {messages[0]['role']}: {messages[0]['content'][:30]} / {messages[-1]['content']}"


async def async_fn(messages):
    return f"async saw {len(messages)} messages"


class AsyncCallable:
    async def __call__(self, messages):
        return "an awaited callable object"


@pytest.mark.parametrize(
    ("obj", "kind"),
    [
        (ScriptedChatModel(model_name="plug"), "chat_model"),
        (RunnableLambda(lambda messages: f"runnable got {len(messages)}"), "runnable"),
        (sync_fn, "function"),
        (async_fn, "function"),
        (AsyncCallable(), "function"),
        (_echo_graph().compile(), "graph"),
        (PersonaAgent(ModelClient.create("test:plug-agent", "persona")), "agent"),
    ],
)
async def test_each_kind_is_adapted_and_replies(obj, kind):
    agent = adapt(obj, "mod:attr")
    assert agent.kind == kind
    assert agent.name == "mod:attr"
    assert isinstance(agent, Agent)
    reply = await agent.respond(PERSONA, CONVERSATION)
    assert reply.ok, reply.error
    assert reply.text.strip()


async def test_persona_system_prompt_comes_first():
    seen = []

    def fn(messages):
        seen.append(messages)
        return "howdy"

    reply = await adapt(fn, "m:f").respond(PERSONA, CONVERSATION)
    assert reply.ok and reply.text == "howdy"
    assert seen[0][0] == {
        "role": "system",
        "content": f"You are {PERSONA}. Your responses should closely "
        "mirror the knowledge and abilities of this persona.",
    }
    assert seen[0][1:] == CONVERSATION


async def test_custom_system_prompt_is_used():
    seen = []
    agent = adapt(lambda m: seen.append(m) or "ok", "m:f", system_prompt="Play {persona}, always.")
    await agent.respond(PERSONA, CONVERSATION)
    assert seen[0][0]["content"] == f"Play {PERSONA}, always."


async def test_graph_reply_is_its_last_message():
    reply = await adapt(_echo_graph().compile(), "m:g").respond(PERSONA, CONVERSATION)
    assert reply.text.startswith("graph saw: You are A 70-year-old")


@pytest.mark.parametrize(
    ("fn", "error"),
    [
        (lambda m: (_ for _ in ()).throw(RuntimeError("boom")), "RuntimeError: boom"),
        (lambda m: "", "empty reply"),
        (lambda m: "   ", "empty reply"),
        (lambda m: 42, "returned int"),
        (lambda m: {"foo": 1}, "without 'messages'"),
        (lambda m: {"messages": [{"role": "user", "content": "x"}]}, "added no reply"),
    ],
)
async def test_failures_and_empty_replies_are_failed_completions(fn, error):
    reply = await adapt(fn, "m:f").respond(PERSONA, CONVERSATION)
    assert reply.status == "failed"
    assert error in reply.error
    assert reply.error.startswith("m:f")


async def test_raising_chat_model_and_runnable_fail_softly():
    async def boom(messages):
        raise ValueError("no route")

    reply = await adapt(RunnableLambda(boom), "m:r").respond(PERSONA, CONVERSATION)
    assert not reply.ok and "ValueError: no route" in reply.error
    reply = await adapt(ScriptedChatModel(model_name="empty"), "m:c").respond(PERSONA, CONVERSATION)
    assert not reply.ok and "empty reply" in reply.error


async def test_agent_kind_failures_are_values():
    class Raises:
        name = "x"

        async def respond(self, persona, messages):
            raise KeyError("gone")

    class WrongType:
        name = "y"

        async def respond(self, persona, messages):
            return "plain string"

    class Empty:
        name = "z"

        async def respond(self, persona, messages):
            return Completion("ok", "")

    for obj, error in (
        (Raises(), "KeyError"),
        (WrongType(), "expected a Completion"),
        (Empty(), "empty reply"),
    ):
        reply = await adapt(obj, "m:a").respond(PERSONA, CONVERSATION)
        assert not reply.ok and error in reply.error


async def test_agent_kind_receives_persona_and_bare_conversation():
    seen = {}

    class Mine:
        name = "mine"

        async def respond(self, persona, messages):
            seen.update(persona=persona, messages=messages)
            return Completion("ok", "fine")

    agent = adapt(Mine(), "m:mine")
    assert (await agent.respond(PERSONA, CONVERSATION)).text == "fine"
    assert seen == {"persona": PERSONA, "messages": CONVERSATION}
    # used as a simulated user (complete with a system message): the system text is its persona
    await agent.complete([{"role": "system", "content": "be a user"}, *CONVERSATION])
    assert seen == {"persona": "be a user", "messages": CONVERSATION}


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        (42, "is int 42, not a LangChain chat model"),
        ("text", "is str 'text', not"),
        (PluginAgent, "is the class personagraph.agents.plugin.PluginAgent; point to an instance"),
        (_echo_graph(), "uncompiled StateGraph; point to graph.compile()"),
        (lambda a, b: "x", "cannot be called with one argument"),
    ],
)
def test_unadaptable_objects_name_what_was_found(obj, message):
    with pytest.raises(PersonagraphError) as info:
        detect_kind(obj, "m:x")
    assert message in str(info.value)
    assert str(info.value).startswith("m:x")


def test_graph_without_messages_state_is_refused():
    from typing import TypedDict

    class S(TypedDict):
        question: str

    builder = StateGraph(S)
    builder.add_node("n", lambda s: {})
    builder.add_edge(START, "n")
    with pytest.raises(PersonagraphError, match=r"no 'messages' key \(state keys: question\)"):
        detect_kind(builder.compile(), "m:g")


def test_sync_respond_is_refused():
    class Sync:
        name = "s"

        def respond(self, persona, messages):
            return Completion("ok", "x")

    with pytest.raises(PersonagraphError, match="not async"):
        detect_kind(Sync(), "m:s")


@pytest.fixture
def plugin_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A user module in a fresh working directory (found through the cwd, like uvicorn)."""
    (tmp_path / "my_agents.py").write_text(
        textwrap.dedent("""
        def reply(messages):
            return "from my module"

        class Box:
            inner = staticmethod(reply)

        box = Box()
        number = 7
    """)
    )
    (tmp_path / "broken_agents.py").write_text("import not_a_real_dependency_xyz\n")
    (tmp_path / "raising_agents.py").write_text("raise RuntimeError('bad import-time config')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", str(tmp_path))])
    for name in ("my_agents", "broken_agents", "raising_agents"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    return "my_agents"


async def test_load_agent_from_cwd_and_dotted_attr(plugin_module):
    agent = load_agent(f"{plugin_module}:reply")
    assert agent.name == "my_agents:reply" and agent.kind == "function"
    assert (await agent.respond(PERSONA, CONVERSATION)).text == "from my module"
    assert load_agent("my_agents:box.inner").name == "my_agents:box.inner"


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("my_agents", "expected module:attr"),
        ("my_agents:", "expected module:attr"),
        ("my agents:x", "expected module:attr"),
        ("no_such_module_abc:agent", "no module named 'no_such_module_abc'; run from the directory"),
        (
            "local:qwen2.5-coder-0.5b",
            "expected module:attr, e.g. examples.function_agent:agent (for a model spec use --model)",
        ),
        ("test:agent", "for a model spec use --model"),
        ("my_agents:missing", "my_agents has no attribute 'missing' (it has: Box, box, number, reply)"),
        ("my_agents:box.nope", "my_agents:box has no attribute 'nope'"),
        ("my_agents:number", "is int 7, not"),
        ("broken_agents:x", "importing broken_agents failed: No module named 'not_a_real_dependency_xyz'"),
        ("raising_agents:x", "importing raising_agents failed: RuntimeError: bad import-time config"),
    ],
)
def test_load_agent_errors(plugin_module, path, message):
    with pytest.raises(PersonagraphError) as info:
        load_agent(path)
    assert message in str(info.value)
