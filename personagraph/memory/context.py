"""A dialogue context as recall sees it: turns with speakers, and the query views built from them.

Long dialogue prefixes make poor queries for short event records: the user's own words and the latest
turns carry most of the signal. Recall therefore embeds several views of one context — the whole
prefix, the user's turns, the last user turn, all turn texts, and every turn on its own.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, Field

ASSISTANT = "Assistant"
_TAGGED = re.compile(r"^<([^<>]{1,40})>\s*:\s*(.*)$", re.DOTALL)
_MARKERS = {"<BOD>", "<EOD>"}


class Turn(BaseModel):
    """One utterance."""

    speaker: str
    text: str


class DialogueContext(BaseModel):
    """The conversation so far. ``raw`` keeps the original text when there is one (MADial prefixes)."""

    turns: list[Turn] = Field(default_factory=list)
    assistant: str = ASSISTANT
    raw: str | None = None

    def is_user(self, turn: Turn) -> bool:
        """Whether a turn is the user's (anything the assistant did not say)."""
        return turn.speaker != self.assistant

    def user_turns(self) -> list[str]:
        """The user's utterances, oldest first."""
        return [t.text for t in self.turns if self.is_user(t) and t.text.strip()]

    def texts(self) -> list[str]:
        """Every utterance, oldest first."""
        return [t.text for t in self.turns if t.text.strip()]

    def prefix(self) -> str:
        """The whole context as one text (the original text when known)."""
        if self.raw is not None:
            return self.raw
        return "\n".join(f"{t.speaker}: {t.text}" for t in self.turns)

    def views(self) -> dict[str, str]:
        """Whole-text query views: ``prefix``, ``user``, ``last_user`` and ``all``."""
        users = self.user_turns() or self.texts() or [self.prefix()]
        return {
            "prefix": self.prefix() or " ",
            "user": " ".join(users),
            "last_user": users[-1],
            "all": " ".join(self.texts()) or " ",
        }


def _strip_quotes(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] == '"':
        text = text[1:-1]
    return text.strip()


def parse_lines(lines: list[str], *, assistant: str = ASSISTANT) -> list[Turn]:
    """Parses ``<Speaker>: "text"`` lines (MADial's dialogue format) into turns.

    ``<BOD>``/``<EOD>`` markers are dropped. A line without a speaker tag (the data has a few, e.g. a
    whole utterance inside angle brackets) or with the speaker ``None`` is given to the speaker who is
    due: the opposite of the previous turn's.
    """
    turns: list[Turn] = []
    users = [
        m.group(1)
        for line in lines
        if (m := _TAGGED.match(line.strip())) and m.group(1) not in (assistant, "None")
    ]
    user = users[0] if users else "User"
    for line in lines:
        stripped = line.strip()
        if not stripped or stripped in _MARKERS:
            continue
        match = _TAGGED.match(stripped)
        speaker = match.group(1).strip() if match else None
        text = match.group(2) if match else stripped.strip("<>")
        if speaker is None or speaker == "None":
            previous = turns[-1].speaker if turns else assistant
            speaker = user if previous == assistant else assistant
        turns.append(Turn(speaker=speaker, text=_strip_quotes(text)))
    return turns


def context_from_lines(lines: list[str], *, assistant: str = ASSISTANT) -> DialogueContext:
    """A context from MADial-style lines, keeping their exact concatenation as ``raw``."""
    return DialogueContext(
        turns=parse_lines(lines, assistant=assistant), assistant=assistant, raw="".join(lines)
    )


def context_from_messages(messages: list[dict[str, str]], *, user: str = "User") -> DialogueContext:
    """A context from chat messages (``role`` user/assistant, ``content``); system messages are skipped."""
    turns = [
        Turn(
            speaker=ASSISTANT if m.get("role") == "assistant" else m.get("name") or user,
            text=m.get("content", ""),
        )
        for m in messages
        if m.get("role") in ("user", "assistant")
    ]
    return DialogueContext(turns=turns)
