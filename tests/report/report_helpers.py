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



def session_record(index: int, *, broke: bool, persona: str = "A pirate captain") -> dict:
    turns = []
    for turn in range(1, 6):
        turns.append({"index": turn, "role": "user", "text": f"user message {turn}", "status": "ok",
                      "level": 1 + turn // 2})
        score = max(1, 5 - turn + (1 if index else 0))
        text = "As an AI language model <i>I</i> cannot" if broke and turn == 4 else f"Arr, answer {turn}"
        turns.append({"index": turn, "role": "assistant", "text": text, "status": "ok",
                      "scores": {"test:j1": {"Persona Consistency": score, "Linguistic Habits": score},
                                 "test:j2": {"Persona Consistency": score - 0.5}}})
    return {
        "id": f"s{index}", "persona": persona, "model": "test:agent", "mode": "adversarial" if broke else "normal",
        "turns": turns, "stop_reason": "break" if broke else "max_turns",
        "break": {"level": 2, "turn": 4} if broke else None,
        "session_verdict": {"score": 2 if broke else 4, "rationale": "ok"}, "drift_slope": -0.9 if broke else -0.4,
    }
