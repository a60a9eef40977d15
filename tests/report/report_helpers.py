"""Shared by the report tests: planted values, the scripted test models and record builders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from personagraph.models.testing import register_script

PLANTED_FLAG_KEY = "planted-flag-key-Qx7vT2mW9rL4"
PLANTED_ENV_KEY = "planted-env-key-Hn3pK8sD5fB1"
SCRIPT = '<script>alert("pwned-7")</script>'
IMG = '<img src=x onerror="alert(8)">'
PERSONAS = ("A 70-year-old retired cowboy from Texas", 'A nurse who writes <b>bold</b> notes & "quotes"')


def _xss_answer(messages, schema):
    return f"Howdy partner {SCRIPT} & that's that."


def _xss_judge(messages, schema):
    text = json.dumps(messages)
    score = 1 if "Expected Action" in text else 4
    return json.dumps({"rationale": f"Rationale with {IMG} inside.", "score": score})


register_script("xss", _xss_answer)
register_script("xssjudge", _xss_judge)


def run_eval(run_dir: Path, monkeypatch: pytest.MonkeyPatch, *args: str) -> None:
    from personagraph.cli import app

    monkeypatch.setenv("OPENAI_API_KEY", PLANTED_ENV_KEY)
    result = CliRunner().invoke(app, ["-q", "eval", "--run-dir", str(run_dir), "--api-key", PLANTED_FLAG_KEY,
                                      *args])
    assert result.exit_code == 0, result.output
