"""What a run cost: tokens per role and model, priced from a small table of OpenAI list prices.

Embedded (``local:``) and ``test:`` models cost 0. An ``openai:`` model missing from
``report/prices.yaml`` — or any other spec — has an unknown cost (``None``, shown as "—"), never a guess.
"""

from __future__ import annotations

import re
from typing import Any

from personagraph.resources import read_yaml

PRICES_FILE = "report/prices.yaml"
_SNAPSHOT = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{4})$")


def price_table() -> dict[str, Any]:
    """The parsed price file: ``as_of``, ``currency``, ``per_million_tokens`` {model: {input, output}}."""
    return read_yaml(PRICES_FILE)


def price_of(spec: str) -> tuple[float, float] | None:
    """(input, output) dollars per 1M tokens for a model spec; (0, 0) for local/test; None if unknown."""
    provider, _, name = spec.partition(":")
    if provider in {"local", "test"}:
        return (0.0, 0.0)
    if provider != "openai":
        return None
    prices = price_table()["per_million_tokens"]
    name = name.strip().lower()
    base = _SNAPSHOT.sub("", name)
    for candidate in (name, base):
        if candidate in prices:
            entry = prices[candidate]
            return (float(entry["input"]), float(entry["output"]))
    return None


def cost_of(spec: str, input_tokens: int, output_tokens: int) -> float | None:
    """Dollars for these tokens of this model, or None when its price is unknown."""
    price = price_of(spec)
    if price is None:
        return None
    return (input_tokens * price[0] + output_tokens * price[1]) / 1_000_000


def cost_rows(call_stats: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``RunStore.call_stats()`` rows with a ``cost`` (None when unknown) added to each."""
    return [
        {**row, "cost": cost_of(row["model"], int(row["input_tokens"] or 0), int(row["output_tokens"] or 0))}
        for row in call_stats
    ]


def total_cost(rows: list[dict[str, Any]]) -> tuple[float, bool]:
    """(sum of the known costs, whether some cost is unknown)."""
    known = [row["cost"] for row in rows if row.get("cost") is not None]
    return float(sum(known)), any(row.get("cost") is None for row in rows)
