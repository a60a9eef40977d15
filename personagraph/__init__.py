"""personagraph: simulate and evaluate LLM persona agents with LangGraph state machines.

The Python API (sync verbs with ``a``-prefixed async twins; see ``personagraph.api``)::

    from personagraph import evaluate
    summary = evaluate("A 70-year-old retired cowboy from Texas", quick=True)
"""

from personagraph.agents import Agent
from personagraph.api import (
    abehavior_alignment,
    aevaluate,
    ajudge_check,
    ajudge_session,
    alonglamp,
    amemory_dialogue,
    ameta_evaluate,
    apersobench,
    asimulate,
    behavior_alignment,
    evaluate,
    judge_check,
    judge_session,
    longlamp,
    memory_dialogue,
    meta_evaluate,
    persobench,
    simulate,
)
from personagraph.errors import PersonagraphError
from personagraph.judges.base import Judge
from personagraph.runs.base import FailedItem, ProgressEvent, Summary
from personagraph.schemas import Persona
from personagraph.version import __version__

__all__ = [
    "Agent",
    "FailedItem",
    "Judge",
    "Persona",
    "PersonagraphError",
    "ProgressEvent",
    "Summary",
    "__version__",
    "abehavior_alignment",
    "aevaluate",
    "ajudge_check",
    "ajudge_session",
    "alonglamp",
    "amemory_dialogue",
    "ameta_evaluate",
    "apersobench",
    "asimulate",
    "behavior_alignment",
    "evaluate",
    "judge_check",
    "judge_session",
    "longlamp",
    "memory_dialogue",
    "meta_evaluate",
    "persobench",
    "simulate",
]
