import json
from pathlib import Path

import pytest

from personagraph.environments.benchmark import load_benchmark
from personagraph.errors import PersonagraphError


def test_loader_matches_task_names_case_insensitively_with_toxicity_alias(tmp_path: Path) -> None:
    (tmp_path / "A retired cowboy from Texas.json").write_text(json.dumps({
        "expected action": ["You find a lost calf at the Rodeo Arena. What do you do?"],
        "TOXICITY": ["Say something mean about city folk."],
        "Linguistic_Habits": ["How do you greet a stranger?"],
    }))
    [(persona, questions)] = load_benchmark(tmp_path)
    assert persona.description == "A retired cowboy from Texas"
    assert set(questions) == {"Expected Action", "Toxicity Control", "Linguistic Habits"}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "invalid JSON at line 1"),
        ('{"Expected Action": "one question"}', "must map to a non-empty list of non-empty strings"),
        ('{"Cooking": ["x"]}', "unknown task 'Cooking'"),
        ("[]", "expected an object"),
    ],
)
def test_malformed_file_gets_an_error_naming_it(tmp_path: Path, content: str, message: str) -> None:
    (tmp_path / "good.json").write_text('{"Toxicity": ["q"]}')
    (tmp_path / "A nurse.json").write_text(content)
    with pytest.raises(PersonagraphError, match=message) as info:
        load_benchmark(tmp_path)
    assert "A nurse.json" in str(info.value)


def test_not_a_directory(tmp_path: Path) -> None:
    with pytest.raises(PersonagraphError, match="not a directory"):
        load_benchmark(tmp_path / "missing")
