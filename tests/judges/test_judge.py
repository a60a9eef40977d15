"""The judge's reply schema: bounded for grammar-constrained models, lenient for everyone else."""

from __future__ import annotations

import pytest

from personagraph.judges.protocols import score_schema


@pytest.mark.parametrize("scale", [(1, 5), (0, 3)])
def test_rationale_is_capped_in_the_schema_but_a_long_one_still_validates(scale: tuple[int, int]) -> None:
    schema = score_schema(*scale, with_rationale=True)
    properties = schema.model_json_schema()["properties"]
    assert properties["rationale"]["maxLength"] == 400  # llama.cpp's grammar closes the JSON in time
    assert list(properties) == ["rationale", "score"]  # reasoning before the score
    reply = schema.model_validate({"rationale": "because " * 200, "score": scale[1]})
    assert reply.score == scale[1]  # a provider that ignores maxLength is not turned into a failed verdict
    with pytest.raises(ValueError):
        schema.model_validate({"rationale": "x", "score": scale[1] + 1})
