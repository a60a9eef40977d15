"""MADial-Bench files: the dialogue file, the memory file, and the candidates of the three settings.

Dialogue file (JSONL): ``{"dialogue": ["<BOD>\\n", "<Bart>: \\"...\\"\\n", ...], "test-turn": [i, ...],
"relevant-id": [gold, ...], "user-id": 1}`` — ``test-turn`` indexes ``dialogue`` (the Assistant turn to
produce), the first relevant id is the gold memory. Memory file (JSONL): ``{"<id>": {"time", "scene",
"emotion", "event"}}``; the English file's first 76 lines are user 1's (Bart), the rest user 2's (Lisa).

The retrieval protocol of the paper: one query per dialogue, the text before the first test turn
(``"".join(dialogue[:test_turn[0]])``), searched among the user's own memories.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from personagraph.errors import PersonagraphError
from personagraph.files import read_jsonl
from personagraph.memory.bank import Memory, read_memories
from personagraph.memory.context import DialogueContext, context_from_lines
from personagraph.resources import read_yaml


@lru_cache(maxsize=1)
def facts() -> dict[str, Any]:
    """The dataset facts in ``memory/madial.yaml`` (split, users' names and profiles, dialogue date)."""
    return read_yaml("memory/madial.yaml")


def user_name(user_id: str) -> str:
    """MADial's name for a user id ("1" → Bart); unknown ids are returned as they are."""
    return facts()["users"].get(str(user_id), {}).get("name", str(user_id))


def user_profile(user_id: str) -> str:
    """MADial's one-paragraph profile of a user ("" when unknown)."""
    return facts()["users"].get(str(user_id), {}).get("profile", "")


class MadialDialogue(BaseModel):
    """One MADial dialogue with its test turns and relevant memories."""

    index: int = Field(description="0-based line number among the file's dialogues")
    lines: list[str]
    test_turns: list[int]
    relevant_ids: list[str]
    user_id: str

    @property
    def gold_id(self) -> str:
        """The gold memory (the first relevant id)."""
        return self.relevant_ids[0]

    def query(self, turn: int | None = None) -> str:
        """The paper's retrieval query: every line before the (first) test turn, ``<BOD>`` included."""
        return "".join(self.lines[: self.test_turns[0] if turn is None else turn])

    def context(self, turn: int | None = None) -> DialogueContext:
        """The dialogue before a test turn (default: the first) as a recall context."""
        return context_from_lines(self.lines[: self.test_turns[0] if turn is None else turn])

    def reference(self, turn: int) -> str:
        """The human reference reply at a test turn, without its ``<Assistant>:`` tag and quotes."""
        text = re.sub(r"^\s*<[^<>]*>\s*:\s*", "", self.lines[turn]).strip()
        return text[1:-1].strip() if len(text) >= 2 and text[0] == text[-1] == '"' else text


def load_dialogues(path: str | Path) -> list[MadialDialogue]:
    """Reads MADial's dialogue file.

    Raises:
        PersonagraphError: naming file and line when a line is not JSON or misses/breaks a field.
    """
    path = Path(path)
    dialogues: list[MadialDialogue] = []
    for number, row in read_jsonl(path, objects=True):
        where = f"{path}:{number}"
        for key in ("dialogue", "test-turn", "relevant-id", "user-id"):
            if key not in row:
                raise PersonagraphError(f"{where}: missing field {key!r}")
        lines, turns, relevant = row["dialogue"], row["test-turn"], row["relevant-id"]
        if not (isinstance(lines, list) and lines and all(isinstance(x, str) for x in lines)):
            raise PersonagraphError(f"{where}: 'dialogue' must be a non-empty list of strings")
        if not (
            isinstance(turns, list)
            and turns
            and all(isinstance(t, int) and not isinstance(t, bool) for t in turns)
        ):
            raise PersonagraphError(f"{where}: 'test-turn' must be a non-empty list of integers")
        bad = [t for t in turns if not 0 < t < len(lines)]
        if bad:
            raise PersonagraphError(
                f"{where}: test turn {bad[0]} is outside the dialogue (0..{len(lines) - 1})"
            )
        if not (isinstance(relevant, list) and relevant):
            raise PersonagraphError(f"{where}: 'relevant-id' must be a non-empty list")
        user = row["user-id"]
        if not isinstance(user, (int, str)) or isinstance(user, bool):
            raise PersonagraphError(f"{where}: 'user-id' must be an integer or a string")
        dialogues.append(
            MadialDialogue(
                index=len(dialogues),
                lines=lines,
                test_turns=sorted(turns),
                relevant_ids=list(dict.fromkeys(str(r) for r in relevant)),
                user_id=str(user),
            )
        )
    return dialogues


def load_memories(path: str | Path, *, split: int | None = None, user_id: str | None = None) -> list[Memory]:
    """Reads MADial's memory file; lines 1..``split`` go to user "1", the rest to "2" (default split 76).

    Raises:
        PersonagraphError: naming file and line for a malformed line.
    """
    if user_id is not None:
        return read_memories(path, fmt="madial", user_id=user_id)
    return read_memories(path, fmt="madial", madial_split=facts()["memory_split"] if split is None else split)


def check_references(dialogues: Sequence[MadialDialogue], memories: Sequence[Memory], source: str) -> None:
    """Fails when a dialogue's relevant id is not among its user's memories (a mismatched file pair)."""
    owned = {(m.user_id, m.id) for m in memories}
    for d in dialogues:
        for rid in d.relevant_ids:
            if (d.user_id, rid) not in owned:
                raise PersonagraphError(
                    f"{source}:{d.index + 1}: relevant memory {rid} is not among user {d.user_id}'s memories"
                )


def _norm(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


def setting2_candidates(
    dialogue: MadialDialogue,
    ranked_ids: Sequence[str],
    memories: dict[str, Memory],
    *,
    seed: int,
    negatives: int = 4,
) -> list[Memory]:
    """Setting 2: the gold memory plus ``negatives`` non-relevant ones, de-duplicated, shuffled by seed.

    Negatives are the highest-ranked non-relevant memories of the retriever (hard negatives, as in the
    paper), skipping any whose event text duplicates the gold's or an already chosen one; when the
    ranking runs short, the rest of the user's memories fill in, in a seeded order. The shuffle uses
    ``random.Random(f"{seed}:{dialogue.index}")``, so a dialogue's candidates do not depend on which other
    dialogues are run.

    Args:
        memories: the user's memories by id.
    """
    gold = memories.get(dialogue.gold_id)
    if gold is None:
        raise PersonagraphError(f"dialogue {dialogue.index + 1}: gold memory {dialogue.gold_id} not found")
    rng = random.Random(f"{seed}:{dialogue.index}")
    relevant = set(dialogue.relevant_ids)
    rest = [mid for mid in memories if mid not in set(ranked_ids)]
    rng.shuffle(rest)
    chosen: list[Memory] = [gold]
    seen_text = {_norm(gold.event)}
    for mid in list(ranked_ids) + rest:
        if len(chosen) > negatives:
            break
        memory = memories.get(str(mid))
        if memory is None or memory.id in relevant or _norm(memory.event) in seen_text:
            continue
        seen_text.add(_norm(memory.event))
        chosen.append(memory)
    rng.shuffle(chosen)
    return chosen


def setting3_candidates(ranked_ids: Sequence[str], memories: dict[str, Memory], k: int = 5) -> list[Memory]:
    """Setting 3: the retriever's top ``k`` memories, in rank order."""
    return [memories[str(mid)] for mid in list(dict.fromkeys(ranked_ids))[:k] if str(mid) in memories]
