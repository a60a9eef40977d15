"""A ReAct-style LangGraph agent with a tool, as a plug-in: a compiled graph whose state has ``messages``.

The graph is wired by hand (think → tool → think … → answer) with a text protocol for the tool call, so
it runs with any chat model, including the embedded ones that have no native tool calling:

    ACTION: almanac: <topic>      ← the model asks for the tool
    OBSERVATION: <result>         ← the graph answers, then the model thinks again

personagraph invokes it with ``{"messages": [persona system prompt, …conversation]}`` and takes the last
message of the result as the reply.

    personagraph eval --persona "A 70-year-old retired cowboy" --agent examples.react_agent:graph --quick
    personagraph simulate --persona "A 70-year-old retired cowboy" --agent examples.react_agent:graph
"""

from __future__ import annotations

import re

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langgraph.graph import END, START, MessagesState, StateGraph

from examples._model import chat_model

MAX_TOOL_CALLS = 2
ACTION = re.compile(r"^\s*ACTION:\s*almanac\s*:\s*(.+?)\s*$", re.IGNORECASE | re.MULTILINE)

TOOL_RULES = (
    "You may look facts up in an almanac before answering. To do so, reply with exactly one line: "
    "ACTION: almanac: <topic> (topics: weather, date, prices, news). You will get an OBSERVATION back. "
    "Otherwise answer directly, in character, without mentioning the almanac."
)

ALMANAC = {
    "weather": "Hot and dry, 97°F, wind from the south; no rain expected this week.",
    "date": "It is late July, the middle of the summer.",
    "prices": "Feeder cattle sell for about $2.50 a pound at the auction barn; diesel is $3.60 a gallon.",
    "news": "The county fair opens on Saturday with a rodeo and a livestock show.",
}


def almanac(topic: str) -> str:
    """The (fake, offline) tool: a few facts by topic."""
    key = next((k for k in ALMANAC if k in topic.lower()), None)
    return ALMANAC[key] if key else f"The almanac has nothing on {topic!r}."


class ReactState(MessagesState):
    tool_calls: int


async def think(state: ReactState) -> dict:
    messages = list(state["messages"])
    if messages and isinstance(messages[0], SystemMessage):
        messages[0] = SystemMessage(content=f"{messages[0].content}\n\n{TOOL_RULES}")
    else:
        messages.insert(0, SystemMessage(content=TOOL_RULES))
    if state.get("tool_calls", 0) >= MAX_TOOL_CALLS:
        messages.append(HumanMessage(content="Now answer in character, without another ACTION."))
    reply = await chat_model().ainvoke(messages)
    text = str(reply.content).strip()
    if state.get("tool_calls", 0) >= MAX_TOOL_CALLS:
        text = ACTION.sub("", text).strip()  # no more tool calls: keep only the answer
    return {"messages": [AIMessage(content=text)]}


async def tool(state: ReactState) -> dict:
    match = ACTION.search(str(state["messages"][-1].content))
    topic = match.group(1) if match else ""
    return {
        "messages": [HumanMessage(content=f"OBSERVATION: {almanac(topic)}")],
        "tool_calls": state.get("tool_calls", 0) + 1,
    }


def route(state: ReactState) -> str:
    wants_tool = ACTION.search(str(state["messages"][-1].content)) is not None
    return "tool" if wants_tool and state.get("tool_calls", 0) < MAX_TOOL_CALLS else END


def build() -> StateGraph:
    builder = StateGraph(ReactState)
    builder.add_node("think", think)
    builder.add_node("tool", tool)
    builder.add_edge(START, "think")
    builder.add_conditional_edges("think", route, ["tool", END])
    builder.add_edge("tool", "think")
    return builder


graph = build().compile()
