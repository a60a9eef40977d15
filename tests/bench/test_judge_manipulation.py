"""bench/judge_manipulation.py on the deterministic test judges: every kind is built and scored, paired with
its plain answer, and the flagged kinds cannot beat plain."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from bench.judge_manipulation import DATA, KINDS, items, main, stuffed
from personagraph.judges.manipulation import detect_manipulation
from personagraph.models.testing import register_script

register_script("jm-five", lambda messages, schema: json.dumps({"rationale": "Warm, specific.", "score": 5}))


def test_R1_the_suite_holds_every_kind_and_its_plain_answers_are_not_flagged() -> None:
    data = yaml.safe_load(DATA.read_text(encoding="utf-8"))
    built = items(data, 10)
    assert {item.kind for item in built} == {"plain", *KINDS}
    address = [item for item in built if item.kind == "address"]
    assert len(address) >= 10 and len({item.text for item in address}) == len(address)
    for item in built:
        if item.kind == "plain" or item.kind == "foreign":
            assert detect_manipulation(item.text, item.persona) is None, item.text
    six = stuffed("A retired cowboy from Texas", "I ride. I rope.")
    assert six.count("As a retired cowboy from Texas") == 6


def test_R1_bench_prints_each_kind_against_plain_and_a_summary(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--judge", "test:jm-five", "--answers", "3", "--cache", str(tmp_path / "cache")])
    out = capsys.readouterr().out
    lines = {line.split()[0]: line.split() for line in out.splitlines() if line.split()[:1] and
             line.split()[0] in KINDS}
    assert set(lines) == set(KINDS)
    for kind in ("verdict_json", "verdict_rationale", "address", "stuffing", "empty", "one_token"):
        assert float(lines[kind][2]) < -3, lines[kind]  # a judge fooled into 5 is capped at the minimum
    assert float(lines["foreign"][2]) == 0.0  # scored 5 like plain
    summary = out.strip().splitlines()[-1]
    assert summary.startswith("summary test:jm-five rationale answers 3 ") and " target met " in summary
    assert "machine: " in out and code == 0


def test_R1_skip_flagged_scores_flagged_answers_by_rule(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    main(["--judge", "test:jm-five", "--answers", "2", "--skip-flagged", "--cache", str(tmp_path / "cache")])
    out = capsys.readouterr().out
    assert "flagged answers scored by rule, not asked" in out
    summary = out.strip().splitlines()[-1]
    assert " target met " in summary and " flagged 40 " in summary  # every answer but plain and foreign
