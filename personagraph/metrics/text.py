"""Small text helpers shared by the metric families: whitespace tokens and persona sentences."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

_PERSONA_PREFIX = re.compile(r"^\s*\[[^\]]*persona\]\s*:\s*", re.IGNORECASE)  # "[User 1 persona]: ..." (PersoBench)
_QUOTED = re.compile(r"'((?:[^'\\]|\\.)*)'|\"((?:[^\"\\]|\\.)*)\"")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def tokens(text: str) -> list[str]:
    """Whitespace tokens, as Dist-n and the PersoBench METEOR use them."""
    return text.split()


def _list_literal(text: str) -> list[str] | None:
    """Parses ``["a", "b"]``, ``['a', 'b']`` or numpy's ``['a' 'b']`` into strings, if ``text`` is one.

    Quoted items are read one by one rather than with ``ast.literal_eval``, which would glue numpy's
    space-separated items into one string.
    """
    if not (text.startswith("[") and text.endswith("]")):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return value
    quoted = [a or b for a, b in _QUOTED.findall(text)]
    return [item.replace("\\'", "'").replace('\\"', '"') for item in quoted] or None


def persona_sentences(persona: str | Sequence[str] | None) -> list[str]:
    """Splits a persona into its sentences.

    Accepts a list of sentences, a list literal (JSON, Python or numpy's printed form, optionally after a
    ``[User 1 persona]:`` prefix as in PersoBench's CSVs), newline-separated lines, or running text split
    after ``.``, ``!`` and ``?``.

    Args:
        persona: the persona as found in a data file.

    Returns:
        Non-empty, stripped sentences (``[]`` for a missing persona).
    """
    if persona is None:
        return []
    if not isinstance(persona, str):
        return [str(item).strip() for item in persona if str(item).strip()]
    text = _PERSONA_PREFIX.sub("", persona.strip())
    items = _list_literal(text)
    if items is None:
        lines = [line for line in text.splitlines() if line.strip()]
        items = lines if len(lines) > 1 else _SENTENCE_END.split(text)
    return [item.strip() for item in items if item.strip()]
