"""What a built-in human-rated benchmark is: pinned source files, a converter per file to meta-eval items,
and where it comes from (citation, licence, the published reference judge, if its files carry one)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from personagraph.judges.benchmarks.sources import SourceFile
from personagraph.judges.meta_eval import MetaItem


@dataclass(frozen=True)
class Subset:
    """One file of a benchmark read as one group of items: its criterion and human scale."""

    name: str
    file: SourceFile
    criterion: str  # a criterion key of judges/meta_eval.py's catalogue
    scale: tuple[int, int]
    convert: Callable[[Subset, Path], list[MetaItem]]
    description: str
    benchmark: str = ""  # filled in by Benchmark

    @property
    def group(self) -> str:
        """The name results are keyed by: ``<benchmark>/<subset>``."""
        return f"{self.benchmark}/{self.name}"

    def item(self, **fields: Any) -> MetaItem:
        """A meta-eval item of this subset: its group, criterion and human scale, and ``fields``."""
        return MetaItem(group=self.group, criterion=self.criterion, scale=self.scale, **fields)


@dataclass(frozen=True)
class Benchmark:
    name: str
    title: str
    citation: str
    licence: str
    subsets: tuple[Subset, ...]
    reference: str | None = None  # the published judge whose scores the items carry

    def __post_init__(self) -> None:
        named = tuple(
            Subset(s.name, s.file, s.criterion, s.scale, s.convert, s.description, self.name)
            for s in self.subsets
        )
        object.__setattr__(self, "subsets", named)
