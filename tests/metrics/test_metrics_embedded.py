"""PersoBench end to end on the real embedded model (llama.cpp on the CPU): two rows, vanilla prompting."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from personagraph.cli import app

pytestmark = pytest.mark.embedded

CSV = """personas,context,act_response
"[User 1 persona]: ['i have a dog.' 'i like hiking.']",User1: what do you do on weekends?,I take my dog hiking in the hills.
"i am a nurse. i love cooking.",User1: what's for dinner tonight?,I will cook pasta tonight.
"""


def test_persobench_with_the_embedded_model(tmp_path: Path) -> None:
    data = tmp_path / "persobench.csv"
    data.write_text(CSV, encoding="utf-8")
    run_dir = tmp_path / "run"
    result = CliRunner().invoke(app, [
        "persobench", "--data", str(data), "--model", "local:qwen2.5-coder-0.5b", "--limit", "2",
        "--max-tokens", "96", "--run-dir", str(run_dir),
    ], env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.output
    summary = json.loads((run_dir / "persobench_summary.json").read_text())["local:qwen2.5-coder-0.5b|vanilla"]
    assert summary["generated"] == 2 and summary["unfinished"] == 0
    assert summary["cost"]["failure_ratio"] is not None and summary["cost"]["mean_response_time_s"] > 0
    rows = [json.loads(line) for line in
            (run_dir / "persobench_local-qwen2.5-coder-0.5b_vanilla.jsonl").read_text().splitlines()]
    assert len(rows) == 2
    for row in rows:
        assert row["failed"] or row["response"].strip()  # a parsed reply or a counted failure, never a crash
        assert 0.0 <= row["rouge1"] <= 1.0 and 0.0 <= row["dist1"] <= 1.0
    assert "failure ratio" in result.output and "all-MiniLM-L6-v2" in result.output
