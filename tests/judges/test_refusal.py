import pytest

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
