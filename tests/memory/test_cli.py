"""``personagraph memory …`` commands on tiny files (offline)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from personagraph.cli import app

runner = CliRunner()


def test_eval_retrieval_prints_table_and_saves_rankings(
    tmp_path: Path, madial_files: tuple[Path, Path]
) -> None:
    dialogues, memories = madial_files
    out = tmp_path / "rank.jsonl"
    result = runner.invoke(
        app,
        [
            "memory",
            "eval-retrieval",
            "--dialogues",
            str(dialogues),
            "--memories",
            str(memories),
            "--method",
            "dense",
            "--k",
            "1,3",
            "--save-rankings",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "MRR" in result.output and "nDCG-MADial" in result.output
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["query_index"] for r in rows] == [0, 1]
    assert set(rows[0]) == {"query_index", "user_id", "relevant_ids", "ranked_ids"}
    assert rows[1]["relevant_ids"] == ["1", "2"] and len(rows[0]["ranked_ids"]) == 6


def test_bad_dialogue_line_is_one_line_exit_2(madial_files: tuple[Path, Path]) -> None:
    dialogues, memories = madial_files
    dialogues.write_text(dialogues.read_text() + "{oops\n")
    result = runner.invoke(
        app, ["memory", "eval-retrieval", "--dialogues", str(dialogues), "--memories", str(memories)]
    )
    assert result.exit_code == 2
    assert f"{dialogues}:3: invalid JSON" in " ".join(result.output.split())


def test_add_search_export_delete(tmp_path: Path) -> None:
    bank = ["--memory-dir", str(tmp_path / "bank")]
    assert (
        runner.invoke(
            app,
            [
                "memory",
                "add",
                "--user",
                "u",
                "--event",
                "I caught a big fish at the lake",
                "--id",
                "f1",
                *bank,
            ],
        ).exit_code
        == 0
    )
    found = runner.invoke(
        app, ["memory", "search", "fishing trip", "--user", "u", "--method", "dense", *bank]
    )
    assert found.exit_code == 0 and "f1" in found.output
    assert "no memories" in runner.invoke(app, ["memory", "search", "fishing", "--user", "v", *bank]).output
    out = tmp_path / "out.jsonl"
    assert runner.invoke(app, ["memory", "export", str(out), "--format", "madial", *bank]).exit_code == 0
    assert json.loads(out.read_text())["f1"]["event"] == "I caught a big fish at the lake"
    assert runner.invoke(app, ["memory", "delete", "f1", "--user", "u", *bank]).exit_code == 0
    assert runner.invoke(app, ["memory", "delete", "--user", "u", *bank]).exit_code == 2
