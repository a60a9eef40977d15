"""Instructability and cost: failure ratio and response time.

A failure is an output that could not be parsed or is empty. The failure ratio is reported next to the
quality metrics, never folded into them as zeros unless a caller asks for that explicitly.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from pydantic import BaseModel


def is_failure(text: str | None) -> bool:
    """True for a missing (unparsable) or empty/whitespace-only output."""
    return text is None or not text.strip()


def failure_ratio(outputs: Sequence[str | None]) -> float | None:
    """Share of outputs that are failures; None for no outputs."""
    if not outputs:
        return None
    return sum(is_failure(text) for text in outputs) / len(outputs)


class CostReport(BaseModel):
    """How reliably and how fast a model produced its outputs.

    Attributes:
        n: items attempted.
        failures: unparsable or empty outputs.
        failure_ratio: ``failures / n`` (None for no items).
        mean_response_time_s: mean seconds per item (None when no times were measured).
        median_response_time_s: median seconds per item.
        total_response_time_s: sum of the measured seconds.
    """

    n: int
    failures: int
    failure_ratio: float | None
    mean_response_time_s: float | None = None
    median_response_time_s: float | None = None
    total_response_time_s: float | None = None


def cost_report(outputs: Sequence[str | None], response_times: Sequence[float] = ()) -> CostReport:
    """Failure count and ratio of ``outputs`` and statistics of the per-item ``response_times``."""
    failures = sum(is_failure(text) for text in outputs)
    times = [float(t) for t in response_times]
    return CostReport(
        n=len(outputs),
        failures=failures,
        failure_ratio=failures / len(outputs) if outputs else None,
        mean_response_time_s=statistics.fmean(times) if times else None,
        median_response_time_s=statistics.median(times) if times else None,
        total_response_time_s=sum(times) if times else None,
    )
