"""Structured-output schemas: bounded for grammar-constrained models, lenient in validation."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from personagraph.schemas import EnvironmentChoice, ExemplarSet, Persona, QuestionList, at_most


def test_at_most_caps_the_list_in_the_schema_only() -> None:
    capped = at_most(QuestionList, "questions", 2)
    schema = capped.model_json_schema()["properties"]["questions"]
    assert schema["maxItems"] == 2 and schema["items"] == {"type": "string", "maxLength": 300}
    assert at_most(QuestionList, "questions", 2) is capped  # one class per cap, so schemas stay cacheable
    reply = capped.model_validate({"questions": ["Where do you ride?"] * 5})
    assert isinstance(reply, QuestionList) and len(reply.questions) == 5  # the caller trims, nothing fails
    assert "maxItems" not in QuestionList.model_json_schema()["properties"]["questions"]
    env = at_most(EnvironmentChoice, "environments", 5).model_json_schema()["properties"]["environments"]
    assert env["maxItems"] == 5 and env["items"]["maxLength"] == 80


def test_exemplars_are_capped_per_score() -> None:
    properties = ExemplarSet.model_json_schema()["properties"]
    assert [properties[f"score_{i}"]["maxLength"] for i in range(1, 6)] == [240] * 5
    long = {f"score_{i}": f"answer {i} " + "word " * 100 for i in range(1, 6)}
    assert ExemplarSet.model_validate(long).by_score()[3] == long["score_3"]


def test_exemplars_that_repeat_a_text_are_not_a_set() -> None:
    refusal = {f"score_{i}": "I'm sorry, but I can't assist with that." for i in range(1, 6)}
    with pytest.raises(ValidationError, match="must differ"):
        ExemplarSet.model_validate(refusal)
    twice = {f"score_{i}": f"Answer {min(i, 4)}." for i in range(1, 6)}  # scores 4 and 5 alike
    with pytest.raises(ValidationError, match="must differ"):
        ExemplarSet.model_validate({**twice, "score_5": "  answer   4. "})


def test_a_persona_keeps_its_words_and_refuses_nothing_visible() -> None:
    assert Persona(description=" A \t retired\ncowboy ").description == "A retired cowboy"
    for blank, message in (("  \n", "empty persona"), ("\u200b \u200d", "only invisible characters")):
        with pytest.raises(ValidationError, match=message):
            Persona(description=blank)
