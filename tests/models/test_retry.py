import math

import pytest

from personagraph.models import ModelClient, ModelSettings, RetryPolicy


@pytest.mark.parametrize("asked", [3600.0, 86400.0, math.inf])
def test_a_long_retry_after_is_capped(asked: float) -> None:
    assert RetryPolicy(max_s=0.001).delay(0, asked) == 60.0
    assert RetryPolicy(max_s=0.001, max_retry_after_s=5).delay(0, asked) == 5.0


def test_a_short_retry_after_is_obeyed() -> None:
    assert RetryPolicy(max_s=0.001).delay(0, 2.5) == 2.5


@pytest.mark.parametrize("asked", [-10.0, math.nan, None])
def test_an_invalid_retry_after_leaves_the_backoff(asked: float | None) -> None:
    assert 0 <= RetryPolicy(base_s=0.001, max_s=0.001).delay(0, asked) <= 0.001


def test_the_cap_comes_from_the_model_settings() -> None:
    client = ModelClient.create("test:agent", "persona", settings=ModelSettings(max_retry_after_s=7))
    assert client.retry.max_retry_after_s == 7
