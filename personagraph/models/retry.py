"""Which provider errors are worth retrying, and how long to wait before the next attempt."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass


class TransientModelError(Exception):
    """A failure that may pass: rate limit, server error, timeout, dropped connection."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with full jitter; a server's Retry-After is honoured when longer."""

    attempts: int = 6
    base_s: float = 0.5
    max_s: float = 30.0

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        backoff = random.uniform(0, min(self.max_s, self.base_s * 2**attempt))
        return max(backoff, retry_after or 0.0)


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
        import openai
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
