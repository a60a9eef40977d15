from pathlib import Path

import pytest
import yaml

from personagraph.judges.refusal import detect_refusal


@pytest.mark.parametrize(
    "text",
    [
        "As an AI, I don't ride horses.",
        "As a language model I cannot have a favorite.",
        "I'm just an AI assistant, so I can't say.",
        "I don’t have personal experiences, but many people enjoy trains.",
        "I cannot role-play as a real person.",
        "I was trained by OpenAI to be helpful.",
    ],
)
def test_persona_breaks_are_detected(text: str) -> None:
    assert detect_refusal(text)


@pytest.mark.parametrize(
    "text",
    [
        "Well partner, nothing beats a good horse and an open trail.",
        "As a lawyer, I'd file an injunction first.",
        "I don't have time for city traffic, I'll tell you that.",
        "My grandson works on AI at some company in Austin.",
    ],
)
def test_in_character_answers_are_not_flagged(text: str) -> None:
    assert detect_refusal(text) is None


SENTENCES = yaml.safe_load(
    (Path(__file__).resolve().parents[2] / "bench" / "refusal_sentences.yaml").read_text(encoding="utf-8")
)


@pytest.mark.parametrize("text", SENTENCES["refusals"])
def test_assistant_refusals_people_write_are_persona_breaks(text: str) -> None:
    """bench/refusal_sentences.yaml: stock refusals ("I'm sorry, but I can't assist with that", "I cannot
    provide…", "I'm not capable of experiencing emotions") seen in real runs."""
    assert detect_refusal(text), text


@pytest.mark.parametrize("text", SENTENCES["in_character"])
def test_the_same_words_in_character_are_not_breaks(text: str) -> None:
    assert detect_refusal(text) is None, detect_refusal(text)
