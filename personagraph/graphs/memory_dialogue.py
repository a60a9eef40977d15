"""Memory-augmented dialogue as a LangGraph StateGraph (MADial's two-stage recall, then the reply).

    START → read_context → detect → retrieve → recognize → respond → END

``read_context`` turns chat messages (or MADial lines) into a dialogue context; ``detect`` finds the
user's emotion and the scene (an LLM when a detector is configured, else the offline prototypes);
``retrieve`` recalls the user's memories from the bank (skipped when the state already carries
candidates, as in MADial's settings 1 and 2); ``recognize`` lets the model choose one memory or none;
``respond`` writes the reply, bringing the chosen memory in. Prompts live in ``prompts/memory_*.yaml``;
this module only wires.

:class:`MemoryAgent` wraps the graph in the ``Agent`` protocol, so a simulated session can run with a
memory-aware agent (``personagraph simulate --agent personagraph.graphs.memory_dialogue:agent`` with
``PERSONAGRAPH_MEMORY_*`` settings), and it can write new memories from the session: one event summary
per exchange worth remembering.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from dataclasses import dataclass, field
from typing import Any, Required

import numpy as np
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from pydantic import BaseModel, Field
from typing_extensions import TypedDict  # Studio reads typing's only on Python ≥ 3.12

from personagraph.embeddings import encode
from personagraph.errors import PersonagraphError
from personagraph.graphs import live_context
from personagraph.memory.bank import Memory, MemoryBank
from personagraph.memory.context import (
    ASSISTANT,
    DialogueContext,
    Turn,
    context_from_lines,
    context_from_messages,
)
from personagraph.memory.emotion import EMOTION_PROTOTYPES, detect_emotion, detect_scene
from personagraph.memory.recall import Recaller, RecallSettings
from personagraph.models import Completion, ModelClient
from personagraph.prompts import load_prompt

SCENES = ("Activity", "Preferences", "Emotional", "Others")


class EmotionScene(BaseModel):
    """The detector's reply."""

    emotion: str = Field(description="the user's emotion, one word")
    scene: str = Field(description="Activity, Preferences, Emotional or Others")


class Recognition(BaseModel):
    """The recognizer's reply: a memory number, 0 for none."""

    choice: int = Field(description="number of the memory to bring up, 0 for none")


class MemoryNote(BaseModel):
    """A memory written from an exchange."""

    remember: bool = Field(description="whether the exchange holds something worth remembering")
    event: str = Field("", description="one third-person sentence")
    emotion: str = Field("", description="one word")
    scene: str = Field("", description="Activity, Preferences, Emotional or Others")


@dataclass
class MemoryDialogueContext:
    """What the nodes use besides the state.

    Args:
        responder: writes the reply (and recognizes, unless ``recognizer`` is given).
        bank: the memory bank (needed unless every state carries ``candidates``).
        recall: recall settings for ``retrieve``; ``k`` memories go to recognition.
        detector: an LLM for emotion/scene; None uses the offline prototypes.
        recognizer: the model choosing the memory (default: ``responder``).
    """

    responder: ModelClient
    bank: MemoryBank | None = None
    recall: RecallSettings = field(default_factory=RecallSettings)
    k: int = 5
    detector: ModelClient | None = None
    recognizer: ModelClient | None = None
    reranker: ModelClient | None = None


class MemoryDialogueState(TypedDict, total=False):
    user_id: str
    user_name: str
    user_profile: str
    persona: str
    date: str
    messages: list[dict[str, str]]
    lines: list[str]
    turns: list[dict[str, str]]
    emotion: str
    scene: str
    candidates: list[dict[str, Any]]
    chosen: dict[str, Any] | None
    recognition_error: str | None
    reply: str
    status: str
    error: str | None


class MemoryDialogueInput(TypedDict, total=False):
    """What a person gives a run (Studio's input form): whose memories (``user_id``) and the conversation so
    far (``messages``), both required; the user's name and today's date, optionally."""

    user_id: Required[str]
    messages: Required[list[dict[str, str]]]
    user_name: str
    date: str


class MemoryDialogueOutput(TypedDict, total=False):
    """What a run returns to a person: the reply, the memory it recognised (if any) among the candidates,
    and the status (with the error of a failed reply)."""

    reply: str
    chosen: dict[str, Any] | None
    candidates: list[dict[str, Any]]
    status: str
    error: str | None


def _ctx(runtime: Runtime[MemoryDialogueContext]) -> MemoryDialogueContext:
    return live_context(runtime, MemoryDialogueContext)


def _dialogue(state: MemoryDialogueState) -> DialogueContext:
    return DialogueContext(turns=[Turn(**t) for t in state.get("turns", [])])


def render_dialogue(
    context: DialogueContext, *, assistant: str = ASSISTANT, user_name: str = "User", limit: int = 16
) -> str:
    """``Speaker: text`` lines of the last ``limit`` turns."""
    lines = []
    for t in context.turns[-limit:]:
        speaker = assistant if t.speaker == context.assistant else (t.speaker or user_name)
        lines.append(f"{speaker}: {t.text}")
    return "\n".join(lines)


def render_memories(memories: list[dict[str, Any]]) -> str:
    """Numbered memory lines (1-based) with time and emotion."""
    return "\n".join(
        f"{i + 1}. ({m.get('time') or 'some time ago'}; {m.get('emotion') or 'no emotion noted'}) "
        f"{m['event']}"
        for i, m in enumerate(memories)
    )


# --- nodes ------------------------------------------------------------------------------------------
async def read_context(state: MemoryDialogueState) -> dict[str, Any]:
    """Chat messages or MADial lines → turns."""
    if state.get("lines"):
        context = context_from_lines(state["lines"])
    else:
        context = context_from_messages(state.get("messages", []), user=state.get("user_name") or "User")
    return {"turns": [t.model_dump() for t in context.turns]}


async def detect(state: MemoryDialogueState, runtime: Runtime[MemoryDialogueContext]) -> dict[str, Any]:
    """The user's emotion and the scene: an LLM when configured (falling back offline on failure)."""
    ctx = _ctx(runtime)
    context = _dialogue(state)
    if ctx.detector is not None:
        messages = load_prompt("memory_detect").messages(
            dialogue=render_dialogue(context, user_name=state.get("user_name", "User")),
            emotions=", ".join(sorted(EMOTION_PROTOTYPES)),
        )
        reply = await ctx.detector.structured(messages, EmotionScene)
        if reply.ok and reply.value is not None:
            scene = next((s for s in SCENES if s.lower() == reply.value.scene.strip().lower()), "Others")
            return {"emotion": reply.value.emotion.strip().lower() or "neutral", "scene": scene}
    model_path = ctx.bank.model_path if ctx.bank is not None else None
    turns = context.user_turns()
    vectors = await asyncio.to_thread(encode, turns, model_path=model_path) if turns else np.zeros((0, 1))
    return {"emotion": detect_emotion(vectors, model_path)[0], "scene": detect_scene(vectors, model_path)[0]}


async def retrieve(state: MemoryDialogueState, runtime: Runtime[MemoryDialogueContext]) -> dict[str, Any]:
    """Recalls the top ``k`` memories (skipped when the state already has candidates)."""
    if state.get("candidates") is not None:
        return {}
    ctx = _ctx(runtime)
    if ctx.bank is None:
        return {"candidates": []}
    recaller = Recaller(ctx.bank, ctx.recall, reranker=ctx.reranker)
    found = await recaller.recall(state["user_id"], _dialogue(state), ctx.k)
    return {"candidates": [r.memory.model_dump() for r in found]}


async def recognize(state: MemoryDialogueState, runtime: Runtime[MemoryDialogueContext]) -> dict[str, Any]:
    """The model chooses one candidate memory, or none."""
    ctx = _ctx(runtime)
    candidates = state.get("candidates") or []
    if not candidates:
        return {"chosen": None, "recognition_error": None}
    user_name = state.get("user_name") or "the user"
    messages = load_prompt("memory_recognize").messages(
        assistant=ASSISTANT,
        user_name=user_name,
        user_profile=state.get("user_profile", ""),
        date=state.get("date") or "today",
        dialogue=render_dialogue(_dialogue(state), user_name=user_name),
        memories=render_memories(candidates),
    )
    reply = await (ctx.recognizer or ctx.responder).structured(messages, Recognition)
    if not reply.ok or reply.value is None:
        return {"chosen": None, "recognition_error": reply.error or "no recognition"}
    choice = reply.value.choice
    chosen = candidates[choice - 1] if 1 <= choice <= len(candidates) else None
    return {"chosen": chosen, "recognition_error": None}


async def respond(state: MemoryDialogueState, runtime: Runtime[MemoryDialogueContext]) -> dict[str, Any]:
    """The reply, bringing the chosen memory in naturally."""
    ctx = _ctx(runtime)
    user_name = state.get("user_name") or "the user"
    chosen = state.get("chosen")
    if chosen:
        instruction = (
            f"You share this memory with {user_name}: ({chosen.get('time') or 'some time ago'}) "
            f"{chosen['event']} "
            "Bring it up naturally in your reply if it helps; keep its details accurate."
        )
    else:
        instruction = "Reply without bringing up any past event."
    messages = load_prompt("memory_respond").messages(
        assistant=ASSISTANT,
        persona=state.get("persona", ""),
        user_name=user_name,
        user_profile=state.get("user_profile", ""),
        date=state.get("date") or "today",
        memory_instruction=instruction,
        dialogue=render_dialogue(_dialogue(state), user_name=user_name),
    )
    reply = await ctx.responder.complete(messages)
    text = reply.text.strip() if reply.ok else ""
    status = "ok" if text else ("empty" if reply.ok else "failed")
    return {"reply": text, "status": status, "error": None if text else (reply.error or "empty reply")}


def build_graph(
    context_schema: type = MemoryDialogueContext, input_schema: type | None = None, output_schema: type | None = None
) -> StateGraph:
    """The uncompiled memory dialogue graph.

    ``context_schema``: what runs pass as ``context``: a MemoryDialogueContext, or settings that build
    one (``personagraph.studio``, for ``langgraph dev``); ``input_schema``/``output_schema``: what a run
    takes and returns (default: the whole state; Studio's form asks for the input schema's fields).
    """
    graph = StateGraph(MemoryDialogueState, context_schema=context_schema, input_schema=input_schema or MemoryDialogueState,
                       output_schema=output_schema or MemoryDialogueState)
    graph.add_node("read_context", read_context)
    graph.add_node("detect", detect)
    graph.add_node("retrieve", retrieve)
    graph.add_node("recognize", recognize)
    graph.add_node("respond", respond)
    graph.add_edge(START, "read_context")
    graph.add_edge("read_context", "detect")
    graph.add_edge("detect", "retrieve")
    graph.add_edge("retrieve", "recognize")
    graph.add_edge("recognize", "respond")
    graph.add_edge("respond", END)
    return graph


_compiled: Any = None


def compiled_graph() -> Any:
    """The compiled graph (built once per process)."""
    global _compiled
    if _compiled is None:
        _compiled = build_graph().compile()
    return _compiled


async def run_memory_dialogue(
    state: MemoryDialogueState, context: MemoryDialogueContext
) -> MemoryDialogueState:
    """Runs the graph once and returns the final state."""
    return await compiled_graph().ainvoke(state, context=context)


# --- writing memories from a session -------------------------------------------------------------------
async def write_memory(
    client: ModelClient,
    bank: MemoryBank,
    user_id: str,
    exchange: list[dict[str, str]],
    *,
    user_name: str = "The user",
    time: str = "",
) -> Memory | None:
    """Summarizes one exchange into a new memory when it holds something worth remembering."""
    text = "\n".join(
        f"{'Assistant' if m['role'] == 'assistant' else user_name}: {m['content']}" for m in exchange
    )
    reply = await client.structured(
        load_prompt("memory_write").messages(exchange=text, user_name=user_name), MemoryNote
    )
    if not reply.ok or reply.value is None or not reply.value.remember or not reply.value.event.strip():
        return None
    note = reply.value
    memory = Memory(
        id=uuid.uuid4().hex[:12],
        user_id=user_id,
        time=time,
        scene=note.scene,
        emotion=note.emotion,
        event=note.event.strip(),
        metadata={"source": "session"},
    )
    await asyncio.to_thread(bank.add, [memory])
    return memory


class MemoryAgent:
    """A memory-aware agent speaking the ``Agent`` protocol (usable in the session graph).

    Args:
        context: the graph's context (responder, bank, recall settings, …).
        user_id: whose memories to use.
        user_name, user_profile: how the agent knows the user.
        writer: when given, each exchange worth remembering is written to the bank after the reply.
    """

    def __init__(
        self,
        context: MemoryDialogueContext,
        user_id: str,
        *,
        user_name: str = "User",
        user_profile: str = "",
        date: str = "",
        writer: ModelClient | None = None,
    ) -> None:
        self.context = context
        self.user_id = user_id
        self.user_name = user_name
        self.user_profile = user_profile
        self.date = date
        self.writer = writer
        self.name = f"memory:{context.responder.name}"
        self.last_state: MemoryDialogueState | None = None

    async def respond(self, persona: str, messages: list[dict[str, str]]) -> Completion:
        state: MemoryDialogueState = {
            "user_id": self.user_id,
            "user_name": self.user_name,
            "user_profile": self.user_profile,
            "persona": persona,
            "date": self.date,
            "messages": messages,
        }
        final = await run_memory_dialogue(state, self.context)
        self.last_state = final
        if final.get("status") != "ok":
            return Completion(status="failed", error=final.get("error") or "no reply")
        if self.writer is not None and self.context.bank is not None and messages:
            exchange = [*messages[-1:], {"role": "assistant", "content": final["reply"]}]
            await write_memory(
                self.writer,
                self.context.bank,
                self.user_id,
                exchange,
                user_name=self.user_name,
                time=self.date,
            )
        return Completion(status="ok", text=final["reply"])


class _EnvMemoryAgent:
    """``module:attr`` plug-in for ``personagraph simulate --agent``, configured by environment variables.

    ``PERSONAGRAPH_MEMORY_MODEL`` (responder spec, required), ``PERSONAGRAPH_MEMORY_DIR`` or
    ``PERSONAGRAPH_CHROMA_URL`` (the bank), ``PERSONAGRAPH_MEMORY_USER`` (user id, default ``user``),
    ``PERSONAGRAPH_MEMORY_USER_NAME``, ``PERSONAGRAPH_MEMORY_WRITE=1`` to write memories from the session.
    """

    name = "memory-agent"

    _KEYS = (
        "PERSONAGRAPH_MEMORY_MODEL",
        "PERSONAGRAPH_CHROMA_URL",
        "PERSONAGRAPH_MEMORY_DIR",
        "PERSONAGRAPH_MEMORY_USER",
        "PERSONAGRAPH_MEMORY_USER_NAME",
        "PERSONAGRAPH_MEMORY_WRITE",
    )

    def __init__(self) -> None:
        self._agent: MemoryAgent | None = None
        self._config: tuple[str | None, ...] = ()

    def _build(self) -> MemoryAgent:
        spec = os.environ.get("PERSONAGRAPH_MEMORY_MODEL")
        if not spec:
            raise PersonagraphError(
                "personagraph.graphs.memory_dialogue:agent: PERSONAGRAPH_MEMORY_MODEL is not set; set it to the "
                "memory agent's model spec: export PERSONAGRAPH_MEMORY_MODEL=local:qwen2.5-coder-0.5b"
            )
        location = os.environ.get("PERSONAGRAPH_CHROMA_URL") or os.environ.get(
            "PERSONAGRAPH_MEMORY_DIR", "runs/memory"
        )
        responder = ModelClient.create(spec, "memory_responder", temperature=0.7, max_tokens=256)
        context = MemoryDialogueContext(responder=responder, bank=MemoryBank(location))
        writer = responder if os.environ.get("PERSONAGRAPH_MEMORY_WRITE") == "1" else None
        return MemoryAgent(
            context,
            os.environ.get("PERSONAGRAPH_MEMORY_USER", "user"),
            user_name=os.environ.get("PERSONAGRAPH_MEMORY_USER_NAME", "User"),
            writer=writer,
        )

    async def respond(self, persona: str, messages: list[dict[str, str]]) -> Completion:
        config = tuple(os.environ.get(k) for k in self._KEYS)
        if self._agent is None or config != self._config:
            self._agent, self._config = self._build(), config
        return await self._agent.respond(persona, messages)


agent = _EnvMemoryAgent()

