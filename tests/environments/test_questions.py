"""Question generation: the questions asked are whole, one each, unique and as many as requested."""

from __future__ import annotations

import json
from typing import Any

import pytest

from personagraph.environments import generate_questions, load_pool, load_tasks
from personagraph.environments.questions import (
    complete_question,
    ends_a_sentence,
    first_question,
    question_as_asked,
    without_trailing_note,
)
from personagraph.models import ModelClient
from personagraph.models.testing import register_script
from personagraph.schemas import QUESTION_MAX_CHARS


def cut_off(text: str) -> str:
    """``text`` padded with a rambling clause and cut at the cap, as llama.cpp's grammar cuts it."""
    return (text + " Do you think you will remember the roundup and the people you met there" * 9)[
        :QUESTION_MAX_CHARS]


def test_a_question_cut_at_the_cap_ends_at_its_last_complete_sentence() -> None:
    written = cut_off("You rode in the roundup. What did you learn from the other hands?")
    assert len(written) == QUESTION_MAX_CHARS
    assert complete_question(written) == "You rode in the roundup. What did you learn from the other hands?"


@pytest.mark.parametrize("written", [
    "What do you do?",
    "  What   do you\ndo next? ",
    'Your neighbour asks "why?"',
    "A question with no ending, short of the cap",
])
def test_a_question_short_of_the_cap_is_kept_whole(written: str) -> None:
    assert complete_question(written) == " ".join(written.split())


def test_a_question_at_the_cap_that_ended_is_kept_whole() -> None:
    written = ("x" * (QUESTION_MAX_CHARS - 15)) + " What do you do?"
    assert complete_question(written) == written


def test_a_cut_question_with_no_sentence_end_is_unusable() -> None:
    assert complete_question(("word " * 100)[:QUESTION_MAX_CHARS]) is None
    # a "?" with no space after it ends no sentence
    no_sentence = ("why?not ever " * 30)[:QUESTION_MAX_CHARS]
    assert no_sentence.endswith(" w") and complete_question(no_sentence) is None


async def test_a_cut_question_is_trimmed_and_an_unfinishable_one_asked_for_again() -> None:
    asked: list[list[dict[str, Any]]] = []

    def script(messages: list[dict[str, Any]], schema: dict[str, Any] | None) -> str:
        asked.append(messages)
        if len(asked) == 1:
            return json.dumps({"questions": [cut_off("At the roundup a calf breaks loose. What do you do?"),
                                             ("and then " * 50)[:QUESTION_MAX_CHARS]]})
        return json.dumps({"questions": ["At the barbecue, someone doubts you ever rode. What do you say?"]})

    register_script("cutting-writer", script)
    batch = await generate_questions(ModelClient.create("test:cutting-writer", "question_gen"),
                                     "A retired cowboy", load_tasks()[0], list(load_pool()[:3]), 2)
    assert batch.questions == ["At the roundup a calf breaks loose. What do you do?",
                               "At the barbecue, someone doubts you ever rode. What do you say?"]
    assert (batch.error, batch.shortfall, batch.extra_calls) == (None, 0, 1)
    follow_up = asked[1][-1]["content"]
    assert "1 usable of the 2" in follow_up
    assert f"1 cut off mid-sentence at {QUESTION_MAX_CHARS} characters" in follow_up


@pytest.mark.parametrize(("text", "ended"), [
    ("What do you do?", True), ('He said "go."', True), ("(a riding arena.)", True), ("Really!", True),
    ("What will you do", False), ("e.g. the", False), ("", False),
])
def test_what_ends_a_sentence(text: str, ended: bool) -> None:
    assert ends_a_sentence(text) is ended


@pytest.mark.parametrize(("written", "asked"), [
    ("At the roundup, tell me about the best moment of the day? What was exciting? How did you feel?",
     "At the roundup, tell me about the best moment of the day?"),
    ("A calf breaks loose at the roundup. What do you do next? Why?",
     "A calf breaks loose at the roundup. What do you do next?"),
    ("Did you hear? The barn dance is cancelled tonight. What do you do?",  # too short to stand alone
     "Did you hear? The barn dance is cancelled tonight. What do you do?"),
    ("A calf breaks loose at the roundup. What do you do next? Explain your reasoning.",  # one question
     "A calf breaks loose at the roundup. What do you do next? Explain your reasoning."),
    ("You decided to sell the ranch. Why did you make that choice?",
     "You decided to sell the ranch. Why did you make that choice?"),
])
def test_an_item_asking_several_questions_is_asked_its_first(written: str, asked: str) -> None:
    assert first_question(written) == asked
    assert question_as_asked(written) == asked


@pytest.mark.parametrize(("written", "asked"), [
    ("At the garden, where did you grow up? (Community Garden, House Fire Evacuation)",
     "At the garden, where did you grow up?"),
    ('They ask "why not?" (Barn Dance)', 'They ask "why not?"'),
    ("Tell me about the rodeo (the County Fair one). What happened?",  # a bracket inside: kept
     "Tell me about the rodeo (the County Fair one). What happened?"),
    ("Describe the roundup (Cattle Ranch Roundup)", "Describe the roundup (Cattle Ranch Roundup)"),  # no "?"
])
def test_a_bracketed_note_after_the_last_question_is_not_asked(written: str, asked: str) -> None:
    assert without_trailing_note(written) == asked
    assert question_as_asked(written) == asked
