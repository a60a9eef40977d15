"""The user side of a session: a simulated user (an LLM with its own persona and goal) or a human.

A user produces the next user message from a :class:`UserView` (who talks to whom, the situation, the
conversation so far, the turn and, in adversarial mode, the pressure level). It answers with a
:class:`UserTurn`; a failed call or an empty message is a value, never an exception. The simulated user
ends the conversation by emitting :data:`STOP_TOKEN`.

Adversarial levels (:func:`level_for_turn` spreads them evenly over the session's turns):
1 casual off-topic questions, 2 direct questions about being an AI, 3 sustained pressure and
contradictory claims about the persona.
"""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from personagraph.environments import load_pool
from personagraph.models import Completion
from personagraph.prompts import load_prompt, render
from personagraph.resources import read_yaml

STOP_TOKEN = "[END]"
LEVELS = {
    1: "casual off-topic",
    2: "direct questions about being an AI",
    3: "sustained pressure and contradictory claims",
}
TurnStatus = Literal["ok", "failed", "empty"]
USER_TURN_CHARS = 500  # per turn in the simulated user's transcript (long agent replies invite copying)
Messages = list[dict[str, str]]


def level_for_turn(turn: int, max_turns: int) -> int:
    """The adversarial level (1–3) of a 1-based ``turn``: the levels are spread evenly over the turns.

    4 turns → 1, 1, 2, 3; 3 turns → 1, 2, 3; 6 turns → 1, 1, 2, 2, 3, 3; 2 turns → 1, 2.
    """
    max_turns = max(1, max_turns)
    turn = min(max(1, turn), max_turns)
    return min(3, 1 + ((turn - 1) * 3) // max_turns)


@dataclass(frozen=True)
class UserView:
    """What the user side sees before writing message ``turn``.

    ``history`` is the conversation from the agent's side: ``user`` entries are this user's earlier
    messages, ``assistant`` entries the agent's replies.
    """

    persona: str
    user_persona: str
    scenario: str
    turn: int
    max_turns: int
    history: Messages = field(default_factory=list)
    level: int | None = None


@dataclass(frozen=True)
class UserTurn:
    """The user's next message. ``stop`` is true when the user ended the conversation."""

    status: TurnStatus
    text: str = ""
    stop: bool = False
    error: str | None = None


@runtime_checkable
class User(Protocol):
    """The user side of a session (simulated or human)."""

    name: str

    async def next_message(self, view: UserView) -> UserTurn: ...


class Speaker(Protocol):
    """Anything that answers a full message list: a ModelClient, a PluginAgent."""

    async def complete(self, messages: Messages) -> Completion: ...


_LABEL = re.compile(
    r"^\s*(?:\*\*)?(?:you|user|me|human|customer|message(?: number)? ?\d*)(?:\*\*)?\s*:\s*", re.IGNORECASE
)
_OTHER_SIDE = re.compile(
    r"^\s*(?:\*\*)?(?:them|agent|assistant|ai|bot|persona)(?:\*\*)?\s*:", re.IGNORECASE | re.MULTILINE
)
_STOP = re.compile(re.escape(STOP_TOKEN), re.IGNORECASE)


def parse_user_text(text: str) -> tuple[str, bool]:
    """Cleans a simulated user's reply: labels, quotes and any invented reply of the other side go;
    returns ``(message, stopped)`` where ``stopped`` means the stop token was emitted."""
    text = text.strip()
    stopped = False
    if match := _STOP.search(text):
        stopped = True
        text = text[: match.start()]
    if match := _OTHER_SIDE.search(text):
        text = text[: match.start()] if match.start() > 0 else text[match.end() :]
    text = _LABEL.sub("", text.strip(), count=1).strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        text = text[1:-1].strip()
    return text, stopped


def transcript_for_user(history: Messages) -> str:
    """The conversation as the simulated user reads it ("You" / "Them")."""
    if not history:
        return "(nothing yet: you start the conversation)"
    lines = [f"{'You' if m['role'] == 'user' else 'Them'}: {_clip(m['content'])}" for m in history]
    return "\n".join(lines)


def _clip(text: str, limit: int = USER_TURN_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _short(persona: str, limit: int = 80) -> str:
    """The user persona as a short reminder ("a curious college student…")."""
    persona = " ".join(persona.split()) or "the user"
    persona = persona[0].lower() + persona[1:] if persona[:2] in ("A ", "An") else persona
    return _clip(persona, limit)


def user_messages(view: UserView) -> Messages:
    """The simulated user's prompt for ``view`` (normal or adversarial by ``view.level``)."""
    name = "user_sim" if view.level is None else "user_adversarial"
    extra = read_yaml(f"prompts/{name}.yaml")
    if view.level is None:
        goal = extra["goal"].strip()
    else:
        goal = str(extra["levels"][int(view.level)]).strip()
    ending = render(extra["ending"], {"stop_token": STOP_TOKEN}).strip()
    return load_prompt(name).messages(
        user_persona=view.user_persona,
        user_persona_short=_short(view.user_persona),
        persona=view.persona,
        scenario=view.scenario,
        goal=goal,
        ending=ending,
        level=view.level or "",
        transcript=transcript_for_user(view.history),
        turn=view.turn,
        max_turns=view.max_turns,
    )


class SimulatedUser:
    """An LLM playing the user: ``speaker`` is a ModelClient (``name`` = its spec) or a plug-in."""

    def __init__(self, speaker: Speaker, name: str | None = None) -> None:
        self.speaker = speaker
        self.name = name or str(getattr(speaker, "spec", None) or getattr(speaker, "name", "user"))

    async def next_message(self, view: UserView) -> UserTurn:
        """The model's next message. Before the agent has said anything the stop marker is not a stop (a
        small model writes it into its opener): the text before it is the message, and an opener that is
        only the marker is an empty message, which ends the session as a failed turn."""
        reply = await self.speaker.complete(user_messages(view))
        if not reply.ok:
            return UserTurn("failed", error=reply.error)
        text, stopped = parse_user_text(reply.text)
        if stopped and not any(m["role"] == "assistant" for m in view.history):
            if not text:
                return UserTurn("empty", error=f"the opening message was only the stop marker {STOP_TOKEN}")
            stopped = False
        if not text and not stopped:
            return UserTurn("empty", error="empty user message")
        return UserTurn("ok", text, stop=stopped)


ReadLine = Callable[[UserView], Awaitable[str | None]] | Callable[[UserView], str | None]
QUIT_WORDS = ("/quit", "/exit", "/end", "/bye", STOP_TOKEN.lower())


class HumanUser:
    """A person playing the user (``personagraph chat``): ``read`` returns their next line, or None at
    end of input; one of :data:`QUIT_WORDS` (or None) ends the conversation."""

    name = "human"

    def __init__(self, read: ReadLine) -> None:
        self.read = read

    async def next_message(self, view: UserView) -> UserTurn:
        if asyncio.iscoroutinefunction(self.read):
            line = await self.read(view)
        else:
            line = await asyncio.to_thread(self.read, view)  # type: ignore[arg-type]
        if line is None or line.strip().lower() in QUIT_WORDS:
            return UserTurn("ok", "", stop=True)
        text, stopped = parse_user_text(line)
        if not text and not stopped:
            return UserTurn("empty", error="empty message")
        return UserTurn("ok", text, stop=stopped)


def default_user_persona(index: int, seed: int = 0) -> str:
    """A user persona from ``prompts/user_personas.yaml``, chosen by session index and seed."""
    personas = read_yaml("prompts/user_personas.yaml")["personas"]
    return personas[random.Random(f"user-{seed}-{index}").randrange(len(personas))]


# Everyday settings where anybody can chat: the default scenarios leave out categories that steer the talk
# by themselves (technology panels invite AI talk; emergencies, health and religion are not small talk).
CASUAL_CATEGORIES = ("social", "food", "family", "travel", "nature", "commerce", "entertainment", "sport")


def default_scenario(index: int, seed: int = 0) -> str:
    """A situation drawn from the environment pool's everyday categories, chosen by session index and seed."""
    pool = [env for env in load_pool() if env.category in CASUAL_CATEGORIES] or list(load_pool())
    env = pool[random.Random(f"scenario-{seed}-{index}").randrange(len(pool))]
    return f"{env.name}: {env.description}"
