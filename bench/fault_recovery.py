"""Transient faults are never permanent: an eval of 5 personas against ``bench/fake_openai.py`` injecting faulty
replies (cut-off JSON, ``null`` content) and 429/500 errors, run, then rerun at most twice.

For each run: exit code, failed items (permanent ones), unscored answers, finished personas, LLM calls, and
whether the run was honest about it: a run with a failed, incomplete or unscored item never exits 0 and never
prints a complete PersonaScore (the score row says "incomplete"). Passes when every item is done after at
most two reruns and every run was honest.

    .venv/bin/python bench/fault_recovery.py [--profile issue|red-team] [--seed 3]

Profiles: ``issue`` — 10% cut-off JSON + 10% null content (20% faulty replies) + 10% 429 + 10% 500;
``red-team`` — the red team's F-5 command: 10% 429, 10% 500, 10% dropped connections, 20% cut-off JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._harness import fake_server, machine  # noqa: E402

PERSONAS = ["A 70-year-old retired cowboy from Texas", "A 36-year-old environmental lawyer from Sydney",
            "A 19-year-old competitive chess player from Chennai", "A 52-year-old night-shift nurse from Glasgow",
            "A 44-year-old jazz pianist from New Orleans"]
PROFILES = {
    "issue": {"rate_malformed": 0.1, "rate_null": 0.1, "rate_429": 0.1, "rate_500": 0.1},
    "red-team": {"rate_429": 0.1, "rate_500": 0.1, "rate_drop": 0.1, "rate_malformed": 0.2},
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", choices=sorted(PROFILES), default="issue")
    parser.add_argument("--seed", type=int, default=3, help="seed of the server's fault draws")
    parser.add_argument("--reruns", type=int, default=2)
    args = parser.parse_args()
    print(machine())
    print(f"profile {args.profile}: {PROFILES[args.profile]}, retry-after 0.1 s, seed {args.seed}")
    honest_runs, done = 0, False
    with tempfile.TemporaryDirectory() as tmp, fake_server(**PROFILES[args.profile], retry_after=0.1,
                                                          seed=args.seed) as server:
        personas = Path(tmp) / "personas.txt"
        personas.write_text("\n".join(PERSONAS) + "\n")
        run_dir = Path(tmp) / "run"
        command = [sys.executable, "-m", "personagraph.cli", "-q", "eval", "--personas", str(personas),
                   "--model", "openai:fake-agent", "--judge", "openai:fake-judge", "--base-url", server.base_url,
                   "--concurrency", "4", "--run-dir", str(run_dir)]
        env = {**os.environ, "OPENAI_API_KEY": "sk-fault-recovery"}
        for number in range(1 + args.reruns):
            result = subprocess.run(command, capture_output=True, text=True, timeout=900, env=env)
            summary = json.loads((run_dir / "summary.json").read_text())
            model = summary["models"].get("openai:fake-agent", {})
            complete = not summary["failures"] and not summary["incomplete"] and not summary.get("unscored")
            score_row = next((line for line in result.stdout.splitlines() if "PersonaScore" in line
                              and "(1–5)" not in line), "")
            shown_complete = bool(score_row) and "incomplete" not in score_row
            honest = (result.returncode == 0) == complete and (complete or not shown_complete)
            honest = honest and (complete or model.get("incomplete") is True)
            honest_runs += honest
            permanent = sum(f["permanent"] for f in summary["failures"])
            print(f"run {number + 1}: exit {result.returncode} · LLM calls {summary['llm_calls']} · failed items "
                  f"{len(summary['failures'])} (permanent {permanent}) · unscored {summary.get('unscored')} · "
                  f"personas finished {summary['personas_finished']}/{summary['personas']} · PersonaScore "
                  f"{'shown' if shown_complete else 'incomplete'} ({model.get('persona_score')}) · "
                  f"retried {summary['retried']}, recovered {summary['recovered']} · honest {honest}")
            if result.returncode not in (0, 3):
                print(result.stderr.strip()[-500:])
            if complete:
                done = True
                break
        stats = server.stats()
    print(f"server: {stats['requests_total']} requests, faults {stats['faults']}")
    print(f"every item done after {number} rerun(s): {done}; honest runs: {honest_runs}/{number + 1}")
    return 0 if done and honest_runs == number + 1 else 1


if __name__ == "__main__":
    sys.exit(main())
