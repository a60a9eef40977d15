"""Persona-swap pairs from PersoBench's IT-ConvAI2 prompts (Afzoon et al., 2024): a real reply that restates
a fact of its speaker's persona, judged against that persona (people's side: 5) and against another
speaker's persona that shares no content word with it (1). Read as pairwise accuracy: the share of pairs a
judge scores higher under the true persona. A floor, not a target: counting the words a reply shares with
a persona fact orders every pair by construction, so it shows that a judge reads the persona at all.
"""

from __future__ import annotations

import csv
import hashlib
from pathlib import Path

from personagraph.errors import PersonagraphError
from personagraph.files import read_text
from personagraph.judges.benchmarks.base import Benchmark, Subset
from personagraph.judges.benchmarks.sources import SourceFile
from personagraph.judges.meta_eval import MetaItem
from personagraph.judges.words import content_words

DATA = SourceFile(
    "persobench",
    "salehafzoon/PersoBench",
    "b08393e07ada45bd26f66425d453207a3d6db48a",
    "Prompts/IT-ConvAI2.csv",
    "8c39ce5df32416d32dbc2ac6c79de0b885b71bb41198ede59d0216f9db0e6575",
    312269,
)
COLUMNS = ("personas", "context", "act_response")
MIN_SHARED = 2  # content words a reply shares with one of its persona's sentences to restate it


def facts(personas: str) -> list[str]:
    return [s.strip() for s in personas.split(".") if s.strip()]


def _start(row: int, count: int) -> int:
    """Where the search for a row's swapped persona starts: fixed by the row, spread over the file."""
    return int(hashlib.sha256(str(row).encode()).hexdigest(), 16) % count


def convert(subset: Subset, path: Path) -> list[MetaItem]:
    """Two items per pair, ``<row>-m`` (own persona, 5) and ``<row>-s`` (another persona, 1), with the pair
    named in ``pair``; rows are the file's data rows from 0."""
    reader = csv.DictReader(read_text(path).splitlines(keepends=True))
    missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise PersonagraphError(f"{path}: not PersoBench's IT-ConvAI2 prompts (no column {missing[0]!r})")
    rows = [(r["personas"] or "", r["context"] or "", (r["act_response"] or "").strip()) for r in reader]
    items: list[MetaItem] = []
    for row, (personas, context, reply) in enumerate(rows):
        reply = reply.split(":", 1)[1].strip() if reply.lower().startswith("user2:") else reply
        words = content_words(reply)
        if not reply or max((len(words & content_words(f)) for f in facts(personas)), default=0) < MIN_SHARED:
            continue
        start = _start(row, len(rows))
        other = next(
            (
                rows[(start + k) % len(rows)][0]
                for k in range(len(rows))
                if (start + k) % len(rows) != row
                and not words & content_words(rows[(start + k) % len(rows)][0])
            ),
            None,
        )
        if other is None:
            continue
        pair = f"{subset.name}-{row}"
        for side, persona, human in (("m", personas, 5.0), ("s", other, 1.0)):
            items.append(
                subset.item(
                    id=f"{row}-{side}",
                    persona=persona.strip(),
                    question=context.strip(),
                    response=reply,
                    human=[human],
                    pair=pair,
                    row=row + 2,
                )
            )
    if not items:
        raise PersonagraphError(f"{path}: no reply restates its persona, so no pair could be built")
    return items


BENCHMARK = Benchmark(
    name="persona-swap",
    title="Persona-swap pairs (PersoBench IT-ConvAI2)",
    citation="Afzoon et al., PersoBench: Benchmarking Personalized Response Generation in Large Language "
    "Models, 2024; the dialogues are ConvAI2's (Dinan et al., 2019)",
    licence="PersoBench's repository as published; downloaded on request, never shipped",
    subsets=(
        Subset(
            "pairs",
            DATA,
            "persona_consistency",
            (1, 5),
            convert,
            "a reply under its own persona (5) against another that shares no content word (1)",
        ),
    ),
)
