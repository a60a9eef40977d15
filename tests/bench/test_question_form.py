"""bench/question_form.py counts the questions cut at the cap as written and how many the run keeps unended."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bench.question_form import main
from personagraph.models.testing import register_script
from personagraph.schemas import QUESTION_MAX_CHARS


def test_cut_questions_are_counted_as_written_and_trimmed_as_kept(capsys: pytest.CaptureFixture[str]) -> None:
    def script(messages: list[dict[str, Any]], schema: dict[str, Any] | None) -> str:
        task = messages[0]["content"].split('The task is "')[1].split('"')[0]
        if task == "Expected Action":  # cut at the cap after one whole sentence
            cut = ("You see a storm coming. What do you do? " + "And then you ride on " * 20)[:QUESTION_MAX_CHARS]
            return json.dumps({"questions": [cut]})
        return json.dumps({"questions": [f"What would you say about {task}? And why?"]})

    register_script("form-writer", script)
    main(["--personas", "2", "--generator", "test:form-writer"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("machine: ")
    assert "10 calls" in lines[1] and "0 tasks with an error" in lines[1]
    assert "cut at the 300-character cap: 2/10 = 0.20" in lines[2]
    assert "not ending a sentence: 0/10 = 0.00" in lines[3] and "asking several things: 8/10 = 0.80" in lines[3]
    last = lines[-1].split()
    assert dict(zip(last[::2], last[1::2]))["cut_at_cap"] == "0.200"
    assert last[:2] == ["questions", "10"] and last[-2] == "s_per_call"
    assert dict(zip(last[::2], last[1::2]))["kept_unended"] == "0.000"
