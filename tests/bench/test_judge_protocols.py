"""bench/judge_protocols.py on the deterministic test judge: a meta-eval run per protocol, a row a subset."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_each_protocol_is_a_meta_eval_run_and_the_table_has_a_row_per_subset(tmp_path: Path) -> None:
    contexts = [
        {
            "context": f"hello\nwhat do you do {c} ?",
            "fact": "your persona: i ride horses.\n",
            "responses": [
                {"response": text, "Uses Knowledge": [k, k, k], "Overall": [o, 3, 3]}
                for text, k, o in (("i ride horses", 1, 5), ("ok", 0, 1), (f"horses {c}", 1, 4))
            ],
        }
        for c in range(4)
    ]
    (tmp_path / "data" / "usr").mkdir(parents=True)
    (tmp_path / "data" / "usr" / "pc_usr_data.json").write_text(json.dumps(contexts))
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "judge_protocols.py"),
            "--judge",
            "test:judge",
            "--protocols",
            "rationale,score",
            "--benchmark",
            "usr-personachat",
            "--benchmark-dir",
            str(tmp_path / "data"),
            "--out",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert (tmp_path / "out" / "rationale" / "meta_eval.json").is_file()
    assert (tmp_path / "out" / "score" / "meta_eval.json").is_file()
    rows = [line for line in lines if line.startswith("usr-personachat/") and " | " in line]
    assert [r.split(" | ")[0] for r in rows] == ["usr-personachat/uses_knowledge", "usr-personachat/overall"]
    assert all(len(r.split(" | ")) == 6 for r in rows)
    assert lines[-1].startswith("best test:judge usr-personachat/uses_knowledge=")
    # the pruning rule's reading: each protocol against the best one on the same items
    against = [line for line in lines if line.startswith("usr-personachat/") and " | " not in line]
    assert len(against) == 2 and all("rationale " in line and "score " in line for line in against)
    verdicts = [line for line in lines if line.startswith("protocol ")]
    assert len(verdicts) == 2 and any("best or within the CI of the best on" in line for line in verdicts)
