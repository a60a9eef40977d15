"""Control arms: agents whose correct ranking against the agent under test is known, and the judges'
standing against them (``eval --controls``).

Beside every agent under test, the same questions are answered by:

* ``generic`` — the tested agent as a generic assistant (persona ``a helpful AI assistant``);
* ``contrast`` — the tested agent playing a contrasting persona (the packaged
  ``judges/contrast_personas.yaml`` one sharing the fewest content words with the real persona), judged
  against the REAL persona, as every answer of the unit is;
* ``refusal`` — a fixed refusal, ``I'm sorry, but I can't assist with that.`` (no model call).

A sound instrument (judges, protocol, rubrics and refusal caps together) scores the contrast and refusal
arms clearly below the agent: the paired 95% bootstrap CI of agent − control (over questions) lies above 0.
When it does not, the instrument is flagged: it cannot tell holding the persona from playing another one,
or from answering nothing. The generic arm is reported, not flagged (a weak agent may well be generic).
No human labels are needed, so this works for any judge, API ones included.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any, Literal

import numpy as np

from personagraph.agents.base import Agent
from personagraph.judges.stats import bootstrap_ci, independent_bootstrap_ci, mean_of_means
from personagraph.judges.validity import content_words, contrast_personas
from personagraph.models import Completion
from personagraph.schemas import TASK_NAMES, ItemScore, short_id

ControlKind = Literal["generic", "contrast", "refusal"]
GENERIC_PERSONA = "a helpful AI assistant"
REFUSAL_TEXT = "I'm sorry, but I can't assist with that."
REFUSAL_NAME = "control:refusal"
FLAGGED_KINDS: tuple[ControlKind, ...] = ("contrast", "refusal")  # a sound judge must score these lower
RULE = ("clearly below = the paired 95% CI of agent − control (bootstrap over questions) lies above 0, "
        "i.e. the CI of control − agent has its upper bound below 0")


def control_name(kind: ControlKind, model: str) -> str:
    """The name of ``model``'s control arm of ``kind`` in results (the refusal arm is shared)."""
    return REFUSAL_NAME if kind == "refusal" else f"control:{kind}:{model}"


def control_names(models: Sequence[str]) -> list[str]:
    """Every control arm of a run over ``models``: a generic and a contrast arm each, one refusal arm."""
    return [control_name(kind, m) for m in models for kind in ("generic", "contrast")] + [REFUSAL_NAME]


def control_kind(name: str) -> tuple[ControlKind, str | None] | None:
    """(kind, tested model) of a control arm's name (None for the refusal arm's model); None otherwise."""
    if name == REFUSAL_NAME:
        return "refusal", None
    for kind in ("generic", "contrast"):
        prefix = f"control:{kind}:"
        if name.startswith(prefix):
            return kind, name[len(prefix):]  # type: ignore[return-value]
    return None


def contrast_persona(persona: str) -> str:
    """The packaged contrast persona sharing the fewest content words with ``persona`` (ties: a choice
    seeded by the persona, so the same persona always gets the same contrast)."""
    own = content_words(persona)
    packaged = sorted(contrast_personas(), key=lambda p: len(content_words(p) & own))
    fewest = len(content_words(packaged[0]) & own)
    return random.Random(short_id(persona, "contrast")).choice(
        [p for p in packaged if len(content_words(p) & own) == fewest])


class PersonaControl:
    """The tested agent answering as another persona (``persona_for`` maps the real one to it)."""

    def __init__(self, agent: Agent, kind: ControlKind, persona_for: Callable[[str], str]) -> None:
        self.agent = agent
        self.kind = kind
        self.name = control_name(kind, agent.name)
        self.persona_for = persona_for

    async def respond(self, persona: str, messages: list[dict[str, str]]) -> Completion:
        return await self.agent.respond(self.persona_for(persona), messages)


class RefusalControl:
    """Refuses every question with :data:`REFUSAL_TEXT`, without a model call."""

    name = REFUSAL_NAME
    kind: ControlKind = "refusal"

    async def respond(self, persona: str, messages: list[dict[str, str]]) -> Completion:
        return Completion("ok", REFUSAL_TEXT)


def control_agents(agents: Iterable[Agent]) -> list[Agent]:
    """The control arms of ``agents`` (tested agents), in :func:`control_names` order."""
    arms: list[Agent] = []
    for agent in agents:
        arms += [PersonaControl(agent, "generic", lambda _: GENERIC_PERSONA),
                 PersonaControl(agent, "contrast", contrast_persona)]
    return [*arms, RefusalControl()]


# --- standing ------------------------------------------------------------------------------------
def _per_question(items: Iterable[ItemScore], model: str) -> dict[tuple[str, str], float]:
    """(task, question id) → ``model``'s score on it (the mean over its samples' scored answers)."""
    found: dict[tuple[str, str], list[float]] = defaultdict(list)
    for item in items:
        if item.model == model and item.score is not None:
            found[(item.task, item.question_id)].append(item.score)
    return {key: float(np.mean(scores)) for key, scores in found.items()}


def paired_standing(agent: dict[tuple[str, str], float], control: dict[tuple[str, str], float],
                    *, seed: int = 0) -> dict[str, Any]:
    """agent − control on the questions both scored: the difference of their PersonaScores (mean of task
    means) with a paired bootstrap 95% CI over questions — stratified by task when every task has two or
    more questions (``resampled: "questions within tasks"``), else over all questions (``"questions"``; the
    mean of the per-question differences, equal to the PersonaScore difference when tasks have equal
    counts, as in ``--quick``)."""
    shared = sorted(key for key in agent if key in control)
    by_task = {task: np.array([agent[k] - control[k] for k in shared if k[0] == task])
               for task in TASK_NAMES if any(k[0] == task for k in shared)}
    diffs = np.array([agent[k] - control[k] for k in shared])
    if by_task and all(d.size >= 2 for d in by_task.values()):
        diff = float(mean_of_means(*by_task.values()))
        low, high = independent_bootstrap_ci(list(by_task.values()), mean_of_means, seed=seed,
                                             method="percentile")
        resampled = "questions within tasks"
    else:
        diff = float(diffs.mean()) if diffs.size else math.nan
        low, high = bootstrap_ci(diffs, np.mean, seed=seed)
        resampled = "questions"
    ci = [low, high] if math.isfinite(low) and math.isfinite(high) else None
    return {"n": len(shared), "tasks": len(by_task), "diff": diff if math.isfinite(diff) else None,
            "ci": ci, "resampled": resampled, "clearly_below": ci is not None and ci[0] > 0}


def control_standing(items: list[ItemScore], models: Sequence[str], *, seed: int = 0,
                     failed: Collection[str] = ()) -> dict[str, Any]:
    """Each tested model's PersonaScore minus each of its control arms', and the instrument's flags.

    ``items``: the item scores of the tested models and of the control arms; ``failed``: the ids of the
    answers that failed (not the model's answer: a transport fault, a crashed agent). Returns ``standing``
    (one row per model × control: ``model``, ``control``, ``kind``, ``n``, ``diff``, ``ci``,
    ``clearly_below``, ``incomplete``, ``flagged``), ``flagged`` (any contrast or refusal arm not clearly
    below) and ``flags`` (one line each). A row whose model or arm has a failed answer is ``incomplete``
    and flags nothing: a failed answer says nothing about the judges.
    """
    rows, flags = [], []
    failed_by = {item.model for item in items if item.answer_id in failed}
    for model in models:
        agent = _per_question(items, model)
        for kind in ("generic", "contrast", "refusal"):
            name = control_name(kind, model)  # type: ignore[arg-type]
            row = {"model": model, "control": name, "kind": kind,
                   **paired_standing(agent, _per_question(items, name), seed=seed),
                   "incomplete": bool({model, name} & failed_by)}
            row["flagged"] = kind in FLAGGED_KINDS and not row["clearly_below"] and not row["incomplete"]
            rows.append(row)
            if row["flagged"]:
                flags.append(flag_line(row))
    return {"rule": RULE, "standing": rows, "flagged": bool(flags), "flags": flags}


def flag_line(row: dict[str, Any]) -> str:
    """Why a control arm flags the instrument, in one line."""
    what = {"contrast": "a contrasting persona", "refusal": "a fixed refusal"}.get(row["kind"], row["kind"])
    if row["diff"] is None or row["ci"] is None:
        found = f"too few questions scored for both ({row['n']}) to show it"
    else:
        found = f"agent − control {row['diff']:+.2f}, 95% CI [{row['ci'][0]:+.2f}, {row['ci'][1]:+.2f}]"
    return (f"the judges did not score {what} ({row['control']}) clearly below {row['model']}: {found}; "
            "its scores cannot be trusted to rank persona fidelity")
