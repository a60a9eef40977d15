"""Outcome accounting of PersoBench runs: items whose call failed are listed, kept on request, retried."""

from __future__ import annotations

from collections.abc import Awaitable
from pathlib import Path

from personagraph import apersobench
from personagraph.runs.persobench import PersoBenchSummary
from tests.metrics.test_persobench import FAST, write_csv
from tests.runs.switch import assert_kept_then_recovered, switch_model


async def test_failed_calls_are_listed_then_retried_with_only_their_calls(tmp_path: Path) -> None:
    model = switch_model("pb-switch", down=lambda text: "sushi" in text)
    data = write_csv(tmp_path)

    def again(retry_failed: bool) -> Awaitable[PersoBenchSummary]:
        return apersobench(data, model=model.spec, score=FAST, run_dir=tmp_path / "run",
                           retry_failed=retry_failed)

    first = await again(True)
    assert (first.generated, first.unfinished) == (2, 1)
    assert [(f.stage, f.item, f.model) for f in first.failures] == [("generations", "3", model.spec)]
    assert "is down" in first.failures[0].reason and first.cost.n == 2  # a failed call is not scored
    second = await assert_kept_then_recovered(first, again, [model])
    assert (second.generated, second.unfinished, second.llm_calls) == (3, 0, 1)
