"""Built-in human-rated benchmarks for ``meta-eval --benchmark``: public sets whose ratings tell how well a
judge agrees with people, each a small module (pinned files, citation, licence, a converter to items).

``persona`` names every benchmark that reads the persona. Files come from the user's cache (downloaded
on first use, verified by sha256) or from ``--benchmark-dir``; ``--sample N`` takes N items (N pairs)
per subset, stratified by the human score and seeded.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from personagraph.errors import PersonagraphError
from personagraph.judges.benchmarks import characterbench, persona_swap, usr
from personagraph.judges.benchmarks.base import Benchmark, Subset
from personagraph.judges.benchmarks.sources import Located, locate
from personagraph.judges.meta_eval import MetaItem

BENCHMARKS: dict[str, Benchmark] = {
    b.name: b for b in (characterbench.BENCHMARK, usr.BENCHMARK, persona_swap.BENCHMARK)
}
GROUPS: dict[str, tuple[str, ...]] = {"persona": ("characterbench", "usr-personachat", "persona-swap")}

__all__ = ["BENCHMARKS", "GROUPS", "Benchmark", "Loaded", "Subset", "load", "resolve"]


def resolve(names: list[str]) -> list[Benchmark]:
    """The benchmarks named (group names expanded, duplicates dropped, in the order given).

    Raises:
        PersonagraphError: an unknown name, listing the known ones.
    """
    chosen: list[str] = []
    for raw in names:
        for name in (n.strip().lower() for n in raw.split(",") if n.strip()):
            if name not in BENCHMARKS and name not in GROUPS:
                known = ", ".join([*BENCHMARKS, *(f"{g} (all of {', '.join(m)})" for g, m in GROUPS.items())])
                raise PersonagraphError(f"--benchmark: unknown benchmark {name!r} (known: {known})")
            chosen.extend(n for n in GROUPS.get(name, (name,)) if n not in chosen)
    if not chosen:
        raise PersonagraphError("--benchmark: no benchmark named")
    return [BENCHMARKS[name] for name in chosen]


@dataclass(frozen=True)
class Loaded:
    """The benchmarks asked for, their items, and what the result records of each file read."""

    benchmarks: list[Benchmark]
    items: list[MetaItem]
    files: list[dict[str, Any]]


def load(
    benchmarks: list[Benchmark],
    *,
    benchmark_dir: Path | None = None,
    sample: int | None = None,
    seed: int = 0,
    progress: IO[str] | None = None,
) -> Loaded:
    """Every subset's items (a file shared by subsets is located once), sampled when ``sample`` is given.

    Raises:
        PersonagraphError: a file that cannot be had or read (see :func:`~.sources.locate`).
    """
    located: dict[str, Located] = {}
    items: list[MetaItem] = []
    files: list[dict[str, Any]] = []
    for benchmark in benchmarks:
        for subset in benchmark.subsets:
            key = subset.file.url
            if key not in located:
                located[key] = found = locate(subset.file, benchmark_dir, progress=progress)
                files.append(
                    {
                        "benchmark": benchmark.name,
                        "source": f"{subset.file.repository}@{subset.file.commit}",
                        "path": subset.file.path,
                        "read_from": str(found.path),
                        "origin": found.origin,
                        "sha256": found.sha256,
                        "pinned_sha256": subset.file.sha256,
                        "full_file": found.pinned,
                    }
                )
            converted = subset.convert(subset, located[key].path)
            items.extend(converted if sample is None else stratified_sample(converted, sample, seed))
    return Loaded(benchmarks, items, files)


def _unit(item: MetaItem) -> str:
    return item.pair or item.id


def stratified_sample(items: list[MetaItem], n: int, seed: int) -> list[MetaItem]:
    """``n`` units (an item, or both items of a pair) stratified by the human score: each score level keeps
    its share of the units (largest remainders), and within a level the units whose seeded hash is lowest.
    The same seed takes the same units from the same file; all of them when there are ``n`` or fewer."""
    units: dict[str, list[MetaItem]] = defaultdict(list)
    for item in items:
        units[_unit(item)].append(item)
    if len(units) <= n:
        return items
    levels: dict[float, list[str]] = defaultdict(list)
    for unit, members in units.items():
        levels[round(sum(m.human_mean for m in members) / len(members), 2)].append(unit)
    for names in levels.values():
        names.sort(key=lambda u: hashlib.sha256(f"{seed}:{u}".encode()).hexdigest())
    exact = {level: n * len(names) / len(units) for level, names in levels.items()}
    quota = {level: int(share) for level, share in exact.items()}
    for level in sorted(exact, key=lambda lv: (quota[lv] - exact[lv], lv))[: n - sum(quota.values())]:
        quota[level] += 1
    kept = {u for level, names in levels.items() for u in names[: quota[level]]}
    return [item for item in items if _unit(item) in kept]
