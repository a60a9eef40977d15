"""Outcome accounting of meta-eval runs: failed verdicts are listed, kept on request, retried on resume."""

from __future__ import annotations

import json
from pathlib import Path

from personagraph.judges.meta_eval import MetaEvalConfig
from personagraph.runs.base import EXIT_INCOMPLETE
from personagraph.runs.meta_eval import run
from tests.runs.switch import assert_sent_only_failed_calls, switch_model

RESPONSES = ["I check the hoses at dawn.", "A storm is no reason to stay in.", "I train the rookies.",
             "The storm siren is my alarm clock.", "I cook chili for the crew.", "I smell smoke at night."]


def write_items(path: Path) -> Path:
    rows = [{"id": f"i{n}", "persona": "a retired firefighter", "question": "What do you do?",
             "response": text, "criterion": "Expected Action", "human": [1 + n % 5]}
            for n, text in enumerate(RESPONSES)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


async def test_failed_verdicts_are_listed_then_retried_with_only_their_calls(tmp_path: Path) -> None:
    judge = switch_model("me-judge", down=lambda text: "storm" in text)
    items = write_items(tmp_path / "items.jsonl")
    config = MetaEvalConfig(items=str(items), judges=[judge.spec], n_resamples=100)
    first = await run(config, tmp_path / "run")
    assert first.exit_code == EXIT_INCOMPLETE and first.incomplete == 0
    assert sorted((f.stage, f.model) for f in first.failures) == [("verdicts", judge.spec)] * 2
    assert all("test:me-judge is down" in f.reason for f in first.failures)
    kept = await run(config.model_copy(update={"retry_failed": False}), tmp_path / "run")
    assert kept.llm_calls == 0 and kept.failures == first.failures and kept.retried == 0
    before = judge.up()
    second = await run(config, tmp_path / "run")
    assert second.exit_code == 0 and second.failures == [] and second.retried == second.recovered == 2
    assert second.llm_calls == 2
    assert_sent_only_failed_calls(judge, before, second.llm_calls)
    assert (await run(config, tmp_path / "run")).llm_calls == 0

