"""The generation loop persobench and longlamp share (``runs.base.generate_pending``)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel

from personagraph.records import StoredItem, register_record_type
from personagraph.runs.base import ProgressEvent, Run, generate_pending

KIND = "test-generations"
GENERATION = f"{KIND}.generation"
register_record_type(GENERATION, StoredItem)


class Config(BaseModel):
    model: str = "test:a"


@dataclass
class Item:
    id: str


async def _generate(
    run_dir: Path, items: list[Item], failing: set[str]
) -> tuple[list[dict], list[str], list[tuple[str, int, int | None, int]]]:
    """Runs the loop once; returns the records, the ids generated and the progress events."""
    asked: list[str] = []
    events: list[ProgressEvent] = []

    async def one(item: Item) -> dict[str, str]:
        asked.append(item.id)
        await asyncio.sleep(0.01 * (len(items) - int(item.id)))  # later items finish first
        if item.id in failing:
            return {"id": item.id, "status": "failed", "error": "endpoint down"}
        return {"id": item.id, "status": "ok"}

    with Run(KIND, run_dir, Config(), unit="u", on_progress=events.append) as run:
        current = await generate_pending(run, items, one, kind=GENERATION, unit="u", model="test:a",
                                         stage="replies")
    return current, asked, [(e.stage, e.done, e.total, e.reused) for e in events]


def test_generates_pending_items_only_and_returns_records_in_item_order(tmp_path: Path) -> None:
    items = [Item(str(i)) for i in range(4)]
    current, asked, events = asyncio.run(_generate(tmp_path, items, failing={"2"}))
    assert sorted(asked) == ["0", "1", "2", "3"]
    assert [r["id"] for r in current] == ["0", "1", "2", "3"]
    assert [r["status"] for r in current] == ["ok", "ok", "failed", "ok"]
    assert ("replies", 4, 4, 0) in events

    current, asked, events = asyncio.run(_generate(tmp_path, items, failing=set()))  # resume: the failed one
    assert asked == ["2"]
    assert [r["status"] for r in current] == ["ok"] * 4
    assert events == [("replies", 3, 4, 3), ("replies", 4, 4, 3)]  # 3 finished before, reused

    current, asked, _ = asyncio.run(_generate(tmp_path, items + [Item("4")], failing=set()))
    assert asked == ["4"]  # a new item is pending, finished ones are not
    assert [r["id"] for r in current] == ["0", "1", "2", "3", "4"]
