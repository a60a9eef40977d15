"""The bench scripts run end to end on tiny arguments, offline (the fake server on loopback, no model), and
print their figure's line, so that a script rots here and not on the day its figure is measured again;
and every script in bench/ is cited on the benchmarks page."""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# script → (tiny arguments, the line its figure is read from)
SMOKE = {
    "fault_recovery.py": ([], r"^every item done after \d+ rerun\(s\): True; honest runs: (\d+)/\1$"),
    "memory_scale.py": (["--sizes", "300", "--queries", "5", "--warmup", "1", "--clusters", "10"],
                        r"^at 300: p50 [\d.]+ ms, p95 [\d.]+ ms \(raw HNSW p50 [\d.]+ ms\), recall@10 [\d.]+"),
    "refusal_markers.py": ([], r"^recall on refusals: \d+/30 = [\d.]+ \[95% CI"),
    "stats_bootstrap.py": (["--sizes", "20", "--resamples", "50", "--repeat", "1"],
                           r"^\s+20\s+50\s+[\d.]+\s"),
    "store_write_behind.py": (["--calls", "10", "--gap", "0.001", "--rounds", "1"],
                              r"^write-behind  : [\d.]+ ms CPU per call, switches per call [\d.]+\+[\d.]+"),
    "throughput.py": (["--personas", "2", "--delay", "0.01", "--concurrency", "4",
                       "--sequential-personas", "1"],
                      r"^ratio_to_ideal@4 [\d.]+ .* cpu_ms_per_call@4 [\d.]+"),
    "tracing_overhead.py": (["--personas", "2", "--concurrency", "4", "--rounds", "1", "--delay", "0.01"],
                            r"^cpu_ms_per_call bare [\d.]+ hooked [\d.]+ change"),
}


IN_PROCESS = {"refusal_markers.py", "stats_bootstrap.py"}  # no event loop policy or other global state set


def run(script: str, args: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> str:
    """The script's output: its ``main()`` in this process when it sets no global state, else a process."""
    if script in IN_PROCESS:
        monkeypatch.setattr(sys, "argv", [script, *args])
        importlib.import_module(f"bench.{script.removesuffix('.py')}").main()
        return capsys.readouterr().out
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LANGSMITH_", "LANGCHAIN_", "OPENAI_"))}
    result = subprocess.run([sys.executable, str(ROOT / "bench" / script), *args], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@pytest.mark.parametrize("script", sorted(SMOKE))
def test_the_script_runs_on_tiny_arguments_and_prints_its_figure(
    script: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    args, figure = SMOKE[script]
    out = run(script, args, monkeypatch, capsys)
    assert re.search(figure, out, re.MULTILINE), out
    if script != "refusal_markers.py":  # the markers' figure depends on no machine
        assert re.search(r"^machine: .*, load average ", out, re.MULTILINE), out


def test_every_script_is_cited_on_the_benchmarks_page() -> None:
    page = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    scripts = sorted(p.name for p in (ROOT / "bench").glob("*.py") if not p.name.startswith("_"))
    assert scripts and [name for name in scripts if f"bench/{name}" not in page] == []
