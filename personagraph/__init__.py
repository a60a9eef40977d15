"""personagraph: simulate and evaluate LLM persona agents with LangGraph state machines.

The Python API (sync verbs with ``a``-prefixed async twins; see ``personagraph.api``)::

    from personagraph import evaluate
    summary = evaluate("A 70-year-old retired cowboy from Texas", quick=True)
"""

from personagraph.agents import Agent
from personagraph.api import aevaluate, evaluate
from personagraph.errors import PersonagraphError
from personagraph.runs.base import FailedItem, ProgressEvent, Summary
from personagraph.schemas import Persona
from personagraph.version import __version__

__all__ = [
    "Agent",
    "FailedItem",
    "Persona",
    "PersonagraphError",
    "ProgressEvent",
    "Summary",
    "__version__",
    "aevaluate",
    "evaluate",
]
