"""USR's PersonaChat annotations (Mehri & Eskenazi, ACL 2020): dialogue contexts with five replies each (the
original human reply, a second human-written one, and three systems), every reply rated by three annotators.
Read: "Uses Knowledge" (0/1: does the reply use the persona's facts) and "Overall" (1–5), both judged on
Persona Consistency against the responder's PersonaChat facts. USR's other ratings (understandable,
natural, maintains context, engaging) are left out: no rubric reads them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from personagraph.errors import PersonagraphError
from personagraph.files import read_json
from personagraph.judges.benchmarks.base import Benchmark, Subset
from personagraph.judges.benchmarks.sources import SourceFile
from personagraph.judges.meta_eval import MetaItem
from personagraph.schemas import short_id

DATA = SourceFile(
    "usr",
    "daqh/llm-eval",
    "41dfd1a21f59aaf4830e35748f13c4b7d031cad5",
    "pc_usr_data.json",
    "9695056e48d2370d93ec0f4d55e2f4dbf4fe8f5645dd41a0c2be871cf21ada71",
    230177,
)
PERSONA_PREFIX = "your persona:"


def persona(facts: str) -> str:
    """PersonaChat's ``your persona: …`` lines as sentences."""
    sentences = []
    for line in facts.splitlines():
        text = line.strip()
        if text.lower().startswith(PERSONA_PREFIX):
            text = text[len(PERSONA_PREFIX) :].strip()
        if text:
            sentences.append(text[0].upper() + text[1:])
    return " ".join(sentences)


def dialogue(context: str) -> str:
    """The context's lines as ``User1:``/``User2:`` turns; its last line (``User1``) is what the replies
    answer."""
    lines = [line.strip() for line in context.splitlines() if line.strip()]
    count = len(lines)
    return "\n".join(f"User{1 if (count - i) % 2 else 2}: {line}" for i, line in enumerate(lines))


def convert(subset: Subset, path: Path) -> list[MetaItem]:
    """One item per rated reply, ``usr-<context hash>-<reply>``: the same id in both subsets, so a reply is
    judged once and read against both ratings."""
    contexts = read_json(path)
    if not isinstance(contexts, list):
        raise PersonagraphError(f"{path}: not USR's PersonaChat file (a JSON list of contexts)")
    rating = "Uses Knowledge" if subset.name == "uses_knowledge" else "Overall"
    items = []
    for number, context in enumerate(contexts, start=1):
        try:
            text: Any = context["context"]
            for index, reply in enumerate(context["responses"]):
                human = [float(x) for x in reply[rating] if x is not None]
                items.append(
                    subset.item(
                        id=f"usr-{short_id(text)[:10]}-{index}",
                        persona=persona(context["fact"]),
                        question=dialogue(text),
                        response=reply["response"].strip(),
                        human=human,
                        row=number,
                    )
                )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise PersonagraphError(
                f"{path}: context {number}: not in USR's format ({type(exc).__name__}: {exc})"
            ) from None
    return items


BENCHMARK = Benchmark(
    name="usr-personachat",
    title="USR PersonaChat ratings",
    citation="Mehri & Eskenazi, USR: An Unsupervised and Reference Free Evaluation Metric for Dialog "
    "Generation, ACL 2020",
    licence="USR's annotations as redistributed in daqh/llm-eval; downloaded on request, never shipped",
    subsets=(
        Subset(
            "uses_knowledge",
            DATA,
            "persona_consistency",
            (0, 1),
            convert,
            "does the reply use the persona's facts (3 raters, 0/1)",
        ),
        Subset(
            "overall",
            DATA,
            "persona_consistency",
            (1, 5),
            convert,
            "overall quality of the reply in the dialogue (3 raters, 1–5)",
        ),
    ),
)
