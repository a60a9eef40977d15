"""Which provider errors are worth retrying, and how long to wait before the next attempt."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass

WAIT_NOTICE_S = 10.0
"""A wait before the next attempt at least this long is announced (one line: which model, why, how long),
so that a run parked by a long Retry-After is seen waiting, not hung."""
_wait_notice: list[Callable[[str], None]] = [logging.getLogger("personagraph").warning]


def set_wait_notice(handler: Callable[[str], None]) -> None:
    """Where wait notices go (the CLI prints them on stderr; the default is the ``personagraph`` logger)."""
    _wait_notice[0] = handler


def notify_wait(line: str) -> None:
    """Announces a long wait before a retry (see :data:`WAIT_NOTICE_S`)."""
    _wait_notice[0](line)


class TransientModelError(Exception):
    """A failure that may pass: rate limit, server error, timeout, dropped connection."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with full jitter; a server's Retry-After is honoured when longer, up to a cap.

    The cap (``max_retry_after_s``, default 60 s) keeps a server that answers ``Retry-After: 86400`` (or
    garbage such as a negative number) from parking a run: past it, the call waits the cap and tries again.
    """

    attempts: int = 6
    base_s: float = 0.5
    max_s: float = 30.0
    max_retry_after_s: float = 60.0

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        backoff = random.uniform(0, min(self.max_s, self.base_s * 2**attempt))
        asked = retry_after if retry_after is not None and retry_after > 0 else 0.0  # NaN, negative: none
        asked = min(asked, self.max_retry_after_s)
        return max(backoff, asked)


def _retry_after(headers: object) -> float | None:
    try:
        value = headers.get("retry-after")  # type: ignore[attr-defined]
        return float(value) if value is not None else None
    except (AttributeError, TypeError, ValueError):
        return None


def classify(error: BaseException) -> TransientModelError | None:
    """Returns a TransientModelError for a retryable error, ``None`` for a permanent one."""
    if isinstance(error, TransientModelError):
        return error
    if isinstance(error, (asyncio.TimeoutError, TimeoutError, ConnectionError)):
        return TransientModelError(f"{type(error).__name__}: {error}")
    try:
        import openai  # only runs that use openai: load it
    except ImportError:  # pragma: no cover - openai is a dependency
        return None
    if isinstance(error, openai.RateLimitError):
        return TransientModelError(
            f"rate limited (HTTP 429): {error.message}", retry_after=_retry_after(error.response.headers)
        )
    if isinstance(error, openai.APIStatusError) and (error.status_code >= 500 or error.status_code == 408):
        return TransientModelError(
            f"server error (HTTP {error.status_code}): {error.message}",
            retry_after=_retry_after(error.response.headers),
        )
    if isinstance(error, (openai.APITimeoutError, openai.APIConnectionError)):
        return TransientModelError(f"{type(error).__name__}: {error}")
    try:
        import httpx
    except ImportError:  # pragma: no cover
        return None
    if isinstance(error, (httpx.TimeoutException, httpx.TransportError)):
        return TransientModelError(f"{type(error).__name__}: {error}")
    return None
