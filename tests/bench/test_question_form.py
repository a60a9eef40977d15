"""bench/question_form.py counts questions cut at the cap or asking several things, written and kept."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bench.question_form import main
from personagraph.models.testing import register_script
from personagraph.schemas import QUESTION_MAX_CHARS


def test_cut_and_several_questions_are_counted_as_written_and_as_kept(capsys: pytest.CaptureFixture) -> None:
    def script(messages: list[dict[str, Any]], schema: dict[str, Any] | None) -> str:
        task = messages[0]["content"].split('The task is "')[1].split('"')[0]
        if task == "Expected Action":  # cut at the cap after one whole sentence
            cut = "You see a storm coming. What do you do? " + "And then you ride on " * 20
            return json.dumps({"questions": [cut[:QUESTION_MAX_CHARS]]})
        return json.dumps({"questions": [f"What would you say about {task}? And why?"]})

    register_script("form-writer", script)
    main(["--personas", "2", "--generator", "test:form-writer"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("machine: ")
    assert "10 calls" in lines[1] and "0 tasks with an error" in lines[1]
    assert "cut at the 300-character cap: 2/10 = 0.20" in lines[2]
    assert "asking several things: 8/10 = 0.80" in lines[2]
    assert "not ending a sentence: 0/10 = 0.00" in lines[3]
    assert "asking several things: 0/10 = 0.00" in lines[3]
    last = lines[-1].split()
    figures = dict(zip(last[::2], last[1::2], strict=True))
    assert figures["questions"] == "10" and figures["cut_at_cap"] == "0.200"
    assert figures["kept_unended"] == figures["several_asked"] == "0.000" and "s_per_call" in figures
