"""Outcome accounting of meta-eval runs: failed verdicts are listed, kept on request, retried on resume."""

from __future__ import annotations

import json
from collections.abc import Awaitable
from pathlib import Path

from personagraph import ameta_evaluate
from personagraph.runs.meta_eval import MetaEvalSummary
from tests.runs.switch import assert_kept_then_recovered, switch_model

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

    def again(retry_failed: bool) -> Awaitable[MetaEvalSummary]:
        return ameta_evaluate(items, judges=[judge.spec], n_resamples=100, run_dir=tmp_path / "run",
                              retry_failed=retry_failed)

    first = await again(True)
    assert sorted((f.stage, f.model) for f in first.failures) == [("verdicts", judge.spec)] * 2
    assert all("test:me-judge is down" in f.reason for f in first.failures)
    second = await assert_kept_then_recovered(first, again, [judge])
    assert second.llm_calls == 2
