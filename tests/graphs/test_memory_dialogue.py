"""The memory dialogue graph and the memory agent, offline with scripted test models and a tiny bank."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from personagraph.graphs.memory_dialogue import (
    MemoryAgent,
    MemoryDialogueContext,
    run_memory_dialogue,
    write_memory,
)
from personagraph.memory.bank import Memory, MemoryBank
from personagraph.memory.recall import RecallSettings
from personagraph.models import ModelClient
from personagraph.models.testing import register_script

BEACH_A = "Anna swam in the sea at the beach and built a sandcastle."
BEACH_B = "Ben went to the beach, swam in the sea and surfed the waves."


def mem_script(messages, schema):
    """Recognizer picks memory 1, detector says happy/Activity, writer notes the event, responder quotes."""
    props = (schema or {}).get("properties", {})
    if "choice" in props:
        return json.dumps({"choice": 1})
    if "emotion" in props and "scene" in props and "remember" not in props:
        return json.dumps({"emotion": "happy", "scene": "Activity"})
    if "remember" in props:
        return json.dumps(
            {
                "remember": True,
                "event": "Anna learned to ride a bike.",
                "emotion": "Happy",
                "scene": "Activity",
            }
        )
    text = messages[-1]["content"]
    found = re.search(r"You share this memory with [^:]+: \([^)]*\) (.+?) Bring it up", text, re.DOTALL)
    return f"Do you remember? {found.group(1)}" if found else "That sounds fun!"


register_script("mem-agent", mem_script)


@pytest.fixture
def bank(tmp_path: Path) -> MemoryBank:
    bank = MemoryBank(tmp_path / "bank")
    bank.add(
        [
            Memory(id="1", user_id="a", time="2023-07-01", emotion="Happy", scene="Activity", event=BEACH_A),
            Memory(
                id="2",
                user_id="a",
                time="2023-03-02",
                emotion="Anxious",
                scene="Activity",
                event="Anna was nervous before her piano exam but passed it.",
            ),
            Memory(id="1", user_id="b", time="2022-08-09", emotion="Happy", scene="Activity", event=BEACH_B),
        ]
    )
    return bank


def context(bank: MemoryBank, **kw) -> MemoryDialogueContext:
    return MemoryDialogueContext(
        responder=ModelClient.create("test:mem-agent", "memory_responder"),
        bank=bank,
        recall=RecallSettings(),
        k=2,
        **kw,
    )


async def test_graph_recalls_recognizes_and_brings_memory_in(bank: MemoryBank) -> None:
    state = {
        "user_id": "a",
        "user_name": "Anna",
        "messages": [{"role": "user", "content": "We went to the beach today and I surfed big waves!"}],
    }
    final = await run_memory_dialogue(state, context(bank))
    assert [c["user_id"] for c in final["candidates"]] == ["a", "a"]
    assert final["chosen"]["event"] == BEACH_A
    assert final["status"] == "ok" and BEACH_A in final["reply"]
    assert final["emotion"] and final["scene"]  # offline detection


async def test_graph_uses_given_candidates_and_llm_detector(bank: MemoryBank) -> None:
    given = [Memory(id="x", user_id="a", event="Anna planted sunflowers.").model_dump()]
    detector = ModelClient.create("test:mem-agent", "memory_detector")
    state = {"user_id": "a", "lines": ["<BOD>\n", '<Anna>: "Look at my garden!"\n'], "candidates": given}
    final = await run_memory_dialogue(state, context(bank, detector=detector))
    assert final["candidates"] == given and final["chosen"]["id"] == "x"
    assert (final["emotion"], final["scene"]) == ("happy", "Activity")
    assert "sunflowers" in final["reply"]


async def test_failed_recognition_is_a_value(bank: MemoryBank) -> None:
    ctx = context(bank, recognizer=ModelClient.create("test:broken", "memory_recognizer"))
    final = await run_memory_dialogue(
        {"user_id": "a", "messages": [{"role": "user", "content": "beach!"}]}, ctx
    )
    assert final["chosen"] is None and final["recognition_error"]
    assert final["status"] == "ok" and final["reply"] == "That sounds fun!"


async def test_memory_agent_writes_memories(bank: MemoryBank) -> None:
    writer = ModelClient.create("test:mem-agent", "memory_writer")
    agent = MemoryAgent(context(bank), "a", user_name="Anna", writer=writer)
    reply = await agent.respond("", [{"role": "user", "content": "I rode my bike without help today!"}])
    assert reply.ok
    assert any(m.event == "Anna learned to ride a bike." for m in bank.memories("a"))
    assert bank.count("b") == 1  # nothing written to another user
    written = await write_memory(
        ModelClient.create("test:broken", "w"), bank, "a", [{"role": "user", "content": "x"}]
    )
    assert written is None


async def test_session_with_memory_agent_brings_in_a_relevant_memory(
    bank: MemoryBank, run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from personagraph.runs.simulate import SimulateConfig
    from personagraph.runs.simulate import run as simulate
    from personagraph.store import RunStore

    register_script("mem-user", lambda messages, schema: "We went to the beach and I surfed big waves!")
    monkeypatch.setenv("PERSONAGRAPH_MEMORY_MODEL", "test:mem-agent")
    monkeypatch.setenv("PERSONAGRAPH_MEMORY_DIR", bank.location)
    monkeypatch.setenv("PERSONAGRAPH_MEMORY_USER", "a")
    monkeypatch.setenv("PERSONAGRAPH_MEMORY_USER_NAME", "Anna")
    config = SimulateConfig(
        persona="A cheerful assistant",
        agent="personagraph.graphs.memory_dialogue:agent",
        user_model="test:mem-user",
        judges=["test:s-judge"],
        turns=1,
    )
    await simulate(config, run_dir)
    record = RunStore(run_dir, readonly=True).records("session")[0]
    replies = [e["text"] for e in record["turns"] if e["role"] == "assistant"]
    assert replies and BEACH_A in replies[0] and BEACH_B not in replies[0]
