"""Outcome accounting of PersoBench runs: items whose call failed are listed, kept on request, retried."""

from __future__ import annotations

from pathlib import Path

from personagraph import apersobench
from personagraph.metrics.persobench import PersoBenchConfig
from personagraph.runs.base import EXIT_INCOMPLETE
from personagraph.runs.persobench import run
from tests.metrics.test_persobench import FAST, write_csv
from tests.runs.switch import assert_sent_only_failed_calls, switch_model


async def test_failed_calls_are_listed_then_retried_with_only_their_calls(tmp_path: Path) -> None:
    model = switch_model("pb-switch", down=lambda text: "sushi" in text)
    config = PersoBenchConfig(data=write_csv(tmp_path), model=model.spec, score=FAST)
    first = await run(config, tmp_path / "run")
    assert first.exit_code == EXIT_INCOMPLETE and (first.generated, first.unfinished) == (2, 1)
    assert [(f.stage, f.item, f.model) for f in first.failures] == [("generations", "3", model.spec)]
    assert "is down" in first.failures[0].reason and first.cost.n == 2  # a failed call is not scored
    kept = await apersobench(config.data, model=model.spec, score=FAST, run_dir=tmp_path / "run",
                             retry_failed=False)  # the API's keyword
    assert kept.llm_calls == 0 and kept.failures == first.failures and kept.retried == 0
    before = model.up()
    second = await run(config, tmp_path / "run")
    assert second.exit_code == 0 and second.failures == [] and second.retried == second.recovered == 1
    assert (second.generated, second.unfinished, second.llm_calls) == (3, 0, 1)
    assert_sent_only_failed_calls(model, before, second.llm_calls)
