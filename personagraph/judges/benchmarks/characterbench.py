"""CharacterBench (Zhou et al., AAAI 2025): role-play replies of seven LLMs scored by people, in the authors'
English translation; each record also carries the authors' CharacterJudge prediction (a 7B judge fine-tuned
on CharacterBench's training data, reference-free, English: ``pred_en_ref_free``), printed beside a user's
judge as the published reference.

Read: attribute consistency, the user asking about the character (``bot``) or saying something the reply
must square with (``human``), 1–4 (1: contradicts the profile), judged on Persona Consistency; behaviour
consistency, 1–3, judged on Linguistic Habits. Left out: memory consistency (a reply's agreement with
earlier dialogue segments the files do not show in the dialogue; no packaged rubric scores one reply on
that), engagement, human-likeness and empathetic responsiveness (no rubric reads them).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from personagraph.errors import PersonagraphError
from personagraph.files import read_json
from personagraph.judges.benchmarks.base import Benchmark, Subset
from personagraph.judges.benchmarks.sources import SourceFile
from personagraph.judges.meta_eval import MetaItem

REPOSITORY = "thu-coai/CharacterBench"
COMMIT = "f4ec56a45b1b3f14b5cdcce5d53d8fdc485c5f63"
REFERENCE_FIELD = "pred_en_ref_free"


def _file(stem: str, sha256: str, size: int) -> SourceFile:
    return SourceFile(
        "characterbench", REPOSITORY, COMMIT, f"eval_data/raw_data/{stem}_test.json", sha256, size
    )


ATTRIBUTE_BOT = _file(
    "attribute_consistency_bot", "ab698376da114a86807ac65c9a0f5772302a014ea2efc9d019bb6cd71f65e41a", 4008231
)
ATTRIBUTE_HUMAN = _file(
    "attribute_consistency_human", "ec9f1c4628b13060633cdb7e17f58893c5f3444fb31bd20c9dfceef15aef17a5", 3654995
)
BEHAVIOR = _file(
    "behavior_consistency_human", "243f1692c336df199e0e2bb0ccbc38cf2de16db203cd3b82ed1426846f822c91", 3561000
)


def dialogue(record: dict[str, Any]) -> str:
    """The English dialogue as ``User1:`` (the user) / ``User2:`` (the character) lines, greeting first; its
    last line is what the judged reply answers. Speakers are told apart on the untranslated records, whose
    ``speaker`` is ``user``, ``character`` or the character's own name."""
    english = record["translation_en"]
    character = {"character", str(record.get("character_name", "")).strip()}
    lines = [f"User2: {english['greeting']}"] if english.get("greeting") else []
    for original, turn in zip(record["dialogue"], english["dialogue"], strict=True):
        speaker = "User2" if str(original.get("speaker", "")).strip() in character else "User1"
        lines.append(f"{speaker}: {turn['utterance']}")
    last = english["messages"]["response"]
    if not lines or lines[-1] != f"User1: {last}":
        lines.append(f"User1: {last}")
    return "\n".join(lines)


def profile(value: Any) -> str:
    """The character profile as text: most are prose; a few are attribute maps, shown one per line."""
    if isinstance(value, dict):
        return "\n".join(f"{key}: {item}" for key, item in value.items())
    return str(value)


def convert(subset: Subset, path: Path) -> list[MetaItem]:
    """One item per record: the profile as the persona, the dialogue as the question, the human score."""
    records = read_json(path)
    if not isinstance(records, list):
        raise PersonagraphError(f"{path}: not a CharacterBench file (a JSON list of records)")
    items = []
    for number, record in enumerate(records, start=1):
        try:
            english = record["translation_en"]
            reference = record.get(REFERENCE_FIELD)
            items.append(
                subset.item(
                    id=f"{subset.name}-{record['id']}",
                    persona=profile(english["character_profile"]),
                    question=dialogue(record),
                    response=english["response_messages"]["response"],
                    human=[float(record["annotation_score"])],
                    reference=None if reference is None else float(reference),
                    row=number,
                )
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise PersonagraphError(
                f"{path}: record {number}: not in CharacterBench's format ({type(exc).__name__}: {exc})"
            ) from None
    return items


BENCHMARK = Benchmark(
    name="characterbench",
    title="CharacterBench (English translation)",
    citation="Zhou et al., CharacterBench: Benchmarking Character Customization of Large Language Models, "
    "AAAI 2025",
    licence="the repository carries no licence file: research use; downloaded on request, never shipped",
    reference="CharacterJudge (the authors' fine-tuned 7B, reference-free)",
    subsets=(
        Subset(
            "attribute_bot",
            ATTRIBUTE_BOT,
            "persona_consistency",
            (1, 4),
            convert,
            "the user asks about the character's own attributes",
        ),
        Subset(
            "attribute_human",
            ATTRIBUTE_HUMAN,
            "persona_consistency",
            (1, 4),
            convert,
            "the user says something the reply must square with the profile",
        ),
        Subset(
            "behavior",
            BEHAVIOR,
            "linguistic_habits",
            (1, 3),
            convert,
            "the profile's speaking style and behaviour",
        ),
    ),
)
