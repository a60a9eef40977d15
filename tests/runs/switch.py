"""A test model that is down for some requests and then comes back: the outcome tests of every run kind.

``switch_model("sw-judge", down=lambda text: "Marvel" in text)`` makes ``test:sw-judge`` answer as the
deterministic test model does, except that a request whose messages ``down`` picks fails at once (a
permanent error, so no retry delay), as a dead endpoint would. ``up()`` brings it back. It remembers every
request body it answered and every one it failed, so a test can show that a resumed run sent only the
calls that had failed or were never made, and no successful call twice.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from personagraph.models.testing import register_script, reply
from personagraph.runs.base import EXIT_INCOMPLETE, Summary

S = TypeVar("S", bound=Summary)


class EndpointDown(RuntimeError):
    """What the switched-off model raises (not a transient error: the call fails without retries)."""


@dataclass(eq=False)
class SwitchModel:
    name: str
    down: Callable[[str], bool] | None = None
    answer: Callable[[str], str | None] = lambda text: None  # a scripted reply (None: the test model's)
    answered: Counter[str] = field(default_factory=Counter)  # request body → times answered
    failed: set[str] = field(default_factory=set)  # request bodies that failed while down

    def __call__(self, messages: list[dict[str, Any]], schema: dict[str, Any] | None) -> str:
        text = json.dumps(messages, sort_keys=True, ensure_ascii=False)
        body = hashlib.sha256((text + json.dumps(schema, sort_keys=True)).encode()).hexdigest()
        if self.down is not None and self.down(text):
            self.failed.add(body)
            raise EndpointDown(f"test:{self.name} is down (connection refused)")
        self.answered[body] += 1
        scripted = self.answer(text)
        if scripted is not None:
            return scripted
        return reply("default", messages, {"schema": schema} if schema else None)

    def up(self) -> set[str]:
        """Brings the model back; returns the bodies it answered so far (to tell them from later ones)."""
        self.down = None
        return set(self.answered)

    @property
    def spec(self) -> str:
        return f"test:{self.name}"


def switch_model(
    name: str, down: Callable[[str], bool] | None = None, answer: Callable[[str], str | None] | None = None
) -> SwitchModel:
    """Registers ``test:<name>`` as a :class:`SwitchModel` (down for the requests ``down`` picks; replies
    from ``answer`` where it gives one)."""
    model = SwitchModel(name, down) if answer is None else SwitchModel(name, down, answer)
    register_script(name, model)
    return model


def assert_sent_only_failed_calls(
    model: SwitchModel, answered_before: set[str], llm_calls: int, *, never_made: bool = False
) -> None:
    """After the resumed run (``llm_calls``: its count): no request body answered twice (the cache served
    every successful call), and every body sent now had failed before — or, with ``never_made``, had at
    least not been answered (a recovered turn of a session leads to turns that were never asked)."""
    assert all(n == 1 for n in model.answered.values()), f"{model.spec}: a successful call was sent again"
    sent_now = set(model.answered) - answered_before
    assert sent_now and llm_calls >= len(sent_now)
    if not never_made:
        assert sent_now <= model.failed, f"{model.spec}: the resumed run sent calls that had not failed"


async def assert_kept_then_recovered(
    first: S,
    again: Callable[[bool], Awaitable[S]],
    models: list[SwitchModel],
    *,
    never_made: tuple[SwitchModel, ...] = (),
) -> S:
    """The second half of every outcome test, after a ``first`` run while ``models`` were down:
    ``again(retry_failed=False)`` keeps the failed items with 0 calls; once the models are back,
    ``again(True)`` recovers every one of them (exit 0), sending only calls that had failed (or, for the
    ``never_made`` models, calls not answered before) and no successful call twice; a third run makes 0 calls.
    Returns the recovering run's summary."""
    assert first.exit_code == EXIT_INCOMPLETE and first.failures
    kept = await again(False)
    assert kept.exit_code == EXIT_INCOMPLETE and kept.llm_calls == 0
    assert kept.failures == first.failures and kept.retried == 0
    answered = {model.name: model.up() for model in models}
    second = await again(True)
    assert second.failures == [] and second.incomplete == 0 and second.exit_code == 0, second.failures
    assert second.retried == second.recovered == len(first.failures)
    for model in models:
        assert_sent_only_failed_calls(model, answered[model.name], second.llm_calls,
                                      never_made=model in never_made)
    third = await again(True)
    assert third.llm_calls == 0 and third.retried == 0 and third.exit_code == 0
    return second
