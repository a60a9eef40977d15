"""``view``'s tables on a narrow terminal: the names people copy (model specs) are never cut."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from personagraph.report.tables import Column, Table
from personagraph.report.view import rich_table

LONG = "openai@vllm:Qwen/Qwen2.5-7B-Instruct"
SHORT = "local:qwen2.5-coder-0.5b"


def _render(table: Table, width: int) -> list[str]:
    console = Console(width=width, file=io.StringIO(), color_system=None)
    console.print(rich_table(table))
    return console.file.getvalue().splitlines()  # type: ignore[attr-defined]


def _wide(models: list[str]) -> Table:
    """A headline-shaped table: a model column and 8 metrics, few rows, so ``view`` turns it."""
    columns = [Column("model", "model")] + [Column(f"m{i}", f"metric {i}", "float") for i in range(8)]
    rows = [{"model": model, **{f"m{i}": (n + 1) / 10 + i / 100 for i in range(8)}}
            for n, model in enumerate(models)]
    return Table("PersoBench", columns, rows)


@pytest.mark.parametrize(
    "models", [[LONG, SHORT], [SHORT, "local:qwen2.5-coder-1.5b"], [LONG + "-extra-long-name"]]
)
def test_turned_table_never_cuts_a_spec_at_60_columns(models: list[str]) -> None:
    lines = _render(_wide(models), 60)
    text = "\n".join(lines)
    for model in models:
        assert any(model in line for line in lines), f"{model!r} is cut:\n{text}"
    for n in range(len(models)):  # every value is still shown, under its model
        for i in range(8):
            assert f"{(n + 1) / 10 + i / 100:.3f}" in text


def test_turned_table_keeps_rows_side_by_side_when_they_fit() -> None:
    lines = _render(_wide([LONG, SHORT]), 120)
    assert any(LONG in line and SHORT in line for line in lines)
    assert sum("metric 0" in line for line in lines) == 1
