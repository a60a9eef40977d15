"""Plug-in agents: ``module:attr`` → an :class:`~personagraph.agents.base.Agent` any graph can use.

``attr`` may be any of:

* a LangChain chat model (``BaseChatModel``): called with ``ainvoke(messages)``;
* any other Runnable (a chain, an LLM, ``RunnableLambda``…): ``ainvoke(messages)``; it may return a
  string, a message, or a dict with ``messages`` (the last one is the reply) or ``output``/``content``;
* a plain function ``(messages) -> str``, sync (run in a worker thread) or async;
* a compiled LangGraph graph whose state has a ``messages`` list: ``ainvoke({"messages": messages})``,
  the last message of the result is the reply;
* an object that already speaks the ``Agent`` protocol (``async respond(persona, messages)``).

Every kind except the last receives OpenAI-style messages (``{"role", "content"}`` dicts) with the
persona system prompt first (``prompts/persona.yaml``, or the adapter's ``system_prompt``), so even a
plain function can see who it is meant to be. A raised exception, an empty reply or a reply of an
unexpected type becomes a failed :class:`~personagraph.models.Completion`, never an exception; a
:class:`~personagraph.errors.PersonagraphError` (the plug-in's own configuration is wrong, and its one line
says what to set) ends the run as bad input does, since running the same command again cannot help.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import os
import sys
import uuid
from collections.abc import Callable
from typing import Any, Literal

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable
from langgraph.graph import StateGraph
from langgraph.pregel import Pregel

from personagraph.errors import PersonagraphError
from personagraph.models import Completion
from personagraph.models.spec import PROVIDERS
from personagraph.prompts import load_prompt, render

Kind = Literal["chat_model", "runnable", "function", "graph", "agent"]
Messages = list[dict[str, str]]
EXPECTED = (
    "a LangChain chat model, a Runnable, a function (messages) -> str (sync or async), "
    "a compiled LangGraph graph with a 'messages' state, or an object with "
    "async respond(persona, messages)"
)


def content_text(content: Any) -> str:
    """The text of a message ``content`` (a string, or a list of content blocks)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and block.get("type") in (None, "text") and "text" in block:
                parts.append(str(block["text"]))
        return "".join(parts)
    return ""


def _reply_text(value: Any, where: str) -> str:
    """Normalises what a plug-in returned to the reply text.

    Raises:
        TypeError: when the value has no recognisable reply in it.
    """
    if isinstance(value, str):
        return value
    if isinstance(value, BaseMessage):
        return content_text(value.content)
    if isinstance(value, dict):
        if isinstance(value.get("messages"), list) and value["messages"]:
            last = value["messages"][-1]
            role = last.get("role") if isinstance(last, dict) else getattr(last, "type", "ai")
            if role in ("user", "human", "system"):
                raise TypeError(f"{where} added no reply: the last message is the {role}'s")
            return _reply_text(last, where)
        for key in ("output", "content", "text", "answer"):
            if isinstance(value.get(key), str):
                return value[key]
        if value.get("role") is not None and "content" in value:
            return content_text(value["content"])
        raise TypeError(
            f"{where} returned a dict without 'messages', 'output' or 'content' "
            f"(keys: {', '.join(map(str, list(value)[:6])) or 'none'})"
        )
    raise TypeError(f"{where} returned {type(value).__name__}, expected a string or a message")


class PluginAgent:
    """Adapts a user object to the ``Agent`` protocol (see the module docstring for the kinds).

    Args:
        target: the object.
        name: how results name it (the ``module:attr`` path).
        kind: what the object was recognised as (see :func:`detect_kind`).
        system_prompt: the persona system prompt template (``{persona}`` slot); default
            ``prompts/persona.yaml``'s ``system``.
    """

    def __init__(self, target: Any, name: str, kind: Kind, system_prompt: str | None = None) -> None:
        self.target = target
        self.name = name
        self.kind = kind
        self.system_prompt = system_prompt or load_prompt("persona").system

    def __repr__(self) -> str:
        return f"PluginAgent({self.name!r}, kind={self.kind!r})"

    async def respond(self, persona: str, messages: Messages) -> Completion:
        """The reply to the conversation, as ``persona``."""
        if self.kind == "agent":
            return await self._guard(self.target.respond(persona, [dict(m) for m in messages]), agent=True)
        system = {"role": "system", "content": render(self.system_prompt, {"persona": persona}).strip()}
        return await self.complete([system, *messages])

    async def complete(self, messages: Messages) -> Completion:
        """One call with the full message list (system message included); never raises."""
        messages = [dict(m) for m in messages]
        if self.kind == "agent":  # an Agent sees the system text as its persona
            system = "\n".join(m["content"] for m in messages if m["role"] == "system")
            rest = [m for m in messages if m["role"] != "system"]
            return await self._guard(self.target.respond(system, rest), agent=True)
        return await self._guard(self._call(messages))

    async def _call(self, messages: Messages) -> Any:
        if self.kind in ("chat_model", "runnable"):
            return await self.target.ainvoke(messages)
        if self.kind == "graph":
            config = {"configurable": {"thread_id": f"personagraph-{uuid.uuid4().hex}"}}
            return await self.target.ainvoke({"messages": messages}, config)
        if inspect.iscoroutinefunction(self.target) or inspect.iscoroutinefunction(
            type(self.target).__call__ if not inspect.isfunction(self.target) else None
        ):
            result = await self.target(messages)
        else:
            result = await asyncio.to_thread(self.target, messages)
        if inspect.isawaitable(result):
            result = await result
        return result

    async def _guard(self, call: Any, *, agent: bool = False) -> Completion:
        try:
            result = await call
            if agent:
                if not isinstance(result, Completion):
                    raise TypeError(
                        f"{self.name}.respond returned {type(result).__name__}, expected a Completion"
                    )
                if result.ok and not result.text.strip():
                    return Completion("failed", error=f"{self.name}: empty reply")
                return result
            text = _reply_text(result, self.name)
        except PersonagraphError:  # its configuration is wrong (the line says what to set): no item succeeds
            raise
        except Exception as exc:  # noqa: BLE001 - a plug-in's failure is a failed reply, never a crash
            return Completion("failed", error=f"{self.name}: {type(exc).__name__}: {exc}"[:500])
        if not text.strip():
            return Completion("failed", error=f"{self.name}: empty reply")
        return Completion("ok", text)


def _describe(obj: Any) -> str:
    if isinstance(obj, type):
        return f"the class {obj.__module__}.{obj.__qualname__}"
    text = repr(obj)
    text = text if len(text) <= 60 else text[:57] + "..."
    return f"{type(obj).__name__} {text}"


def _one_positional(func: Callable[..., Any]) -> bool:
    """Whether ``func`` can be called with exactly one positional argument."""
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):
        return True  # builtins and C callables: trust the user
    try:
        signature.bind(object())
    except TypeError:
        return False
    return True


def detect_kind(obj: Any, where: str) -> Kind:
    """Recognises what ``obj`` is.

    Raises:
        PersonagraphError: naming what was found when it is none of the accepted kinds.
    """
    if callable(getattr(obj, "respond", None)) and not isinstance(obj, type):
        if not inspect.iscoroutinefunction(obj.respond):
            raise PersonagraphError(
                f"{where}: {_describe(obj)} has a respond method that is not async; "
                "the Agent protocol needs async respond(persona, messages) -> Completion"
            )
        return "agent"
    if isinstance(obj, StateGraph):
        raise PersonagraphError(f"{where}: is an uncompiled StateGraph; point to graph.compile() instead")
    if isinstance(obj, Pregel):
        channels = getattr(obj, "channels", {}) or {}
        if "messages" not in channels:
            found = ", ".join(sorted(k for k in channels if not k.startswith("__") and ":" not in k)[:8])
            raise PersonagraphError(
                f"{where}: is a compiled LangGraph graph whose state has no 'messages' "
                f"key (state keys: {found or 'none'}); a plug-in graph must take and return messages"
            )
        return "graph"
    if isinstance(obj, BaseChatModel):
        return "chat_model"
    if isinstance(obj, Runnable):
        return "runnable"
    if isinstance(obj, type):
        raise PersonagraphError(
            f"{where}: is {_describe(obj)}; point to an instance (or a function), expected {EXPECTED}"
        )
    if callable(obj):
        if not _one_positional(obj):
            try:
                signature = str(inspect.signature(obj))
            except (TypeError, ValueError):
                signature = "(?)"
            raise PersonagraphError(
                f"{where}: is a function {signature} that cannot be called with one "
                "argument; expected (messages) -> str"
            )
        return "function"
    raise PersonagraphError(f"{where}: is {_describe(obj)}, not {EXPECTED}")


def adapt(obj: Any, name: str, *, system_prompt: str | None = None) -> PluginAgent:
    """Wraps any accepted object (see the module docstring) as an agent named ``name``."""
    return PluginAgent(obj, name, detect_kind(obj, name), system_prompt=system_prompt)


def _import(module_name: str, path: str) -> Any:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if missing and (module_name == missing or module_name.startswith(missing + ".")):
            hint = (
                " (for a model spec use --model)"
                if module_name in PROVIDERS
                else "; run from the directory that contains it or add it to PYTHONPATH"
            )
            raise PersonagraphError(f"--agent {path}: no module named {missing!r}{hint}") from None
        raise PersonagraphError(f"--agent {path}: importing {module_name} failed: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - the user's module failed to import: say so in one line
        raise PersonagraphError(
            f"--agent {path}: importing {module_name} failed: {type(exc).__name__}: {exc}"
        ) from None


def resolve(path: str, *, add_cwd: bool = True) -> Any:
    """Imports ``module:attr`` (``attr`` may be dotted) and returns the object.

    Like uvicorn, the current working directory is put on ``sys.path`` first (``add_cwd``), so
    ``examples.function_agent:agent`` works from the repository root.

    Raises:
        PersonagraphError: for a malformed path, a missing module or a missing attribute.
    """
    module_name, sep, attr = path.strip().partition(":")
    if (
        not sep
        or not module_name
        or not attr
        or not all(p.isidentifier() for p in attr.split("."))
        or not all(p.isidentifier() for p in module_name.split("."))
    ):
        hint = " (for a model spec use --model)" if module_name in PROVIDERS else ""
        raise PersonagraphError(
            f"--agent {path!r}: expected module:attr, e.g. examples.function_agent:agent{hint}"
        )
    if add_cwd:
        cwd = os.getcwd()
        if cwd not in sys.path and "" not in sys.path and "." not in sys.path:
            sys.path.insert(0, cwd)
    obj: Any = _import(module_name, path)
    walked = module_name
    for part in attr.split("."):
        if not hasattr(obj, part):
            names = [n for n in dir(obj) if not n.startswith("_")]
            shown = ", ".join(names[:10]) + (", ..." if len(names) > 10 else "")
            hint = "; for a model spec use --model" if module_name in PROVIDERS else ""
            raise PersonagraphError(
                f"--agent {path}: {walked} has no attribute {part!r} "
                f"(it has: {shown or 'nothing public'}){hint}"
            )
        obj = getattr(obj, part)
        walked = f"{walked}.{part}" if ":" in walked else f"{walked}:{part}"
    return obj


def load_agent(path: str, *, system_prompt: str | None = None) -> PluginAgent:
    """Loads ``module:attr`` as an agent whose ``name`` is ``path``.

    Raises:
        PersonagraphError: when the module or attribute is missing, or the object is not adaptable.
    """
    path = path.strip()
    return adapt(resolve(path), path, system_prompt=system_prompt)
