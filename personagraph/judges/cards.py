"""Validity cards: how a judge agreed with people, saved by a finished ``meta-eval --benchmark`` and shown in
one line beside every score that judge gives.

A card belongs to one judge spec, one protocol version and, per criterion, one rubric fingerprint: a card
of another protocol or of an edited rubric is never shown for a judge. Cards a user's runs saved are in
``<cache>/validity/`` (or ``$PERSONAGRAPH_CARDS_DIR``); the embedded judge's ships with the package
(``judges/cards/``), measured on the benchmarks' development halves and labelled so. A user's card wins over a shipped one.
"""

from __future__ import annotations

import os
import tempfile
from datetime import date
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from personagraph.errors import PersonagraphError
from personagraph.judges.meta_eval import EXPECTED_SUFFIX, Criterion, CriterionCatalogue
from personagraph.judges.protocols import Protocol, get_protocol
from personagraph.models.weights import cache_root
from personagraph.resources import list_dir, read_text
from personagraph.schemas import short_id
from personagraph.version import __version__

SHIPPED = "judges/cards"
CARDS_ENV = "PERSONAGRAPH_CARDS_DIR"  # where a user's cards are kept (default <cache>/validity)


class Figure(BaseModel):
    """One benchmark subset's reading: ρ with its CI (or pairwise accuracy for pairs), n, the best
    baseline's ρ and the published reference judge's, where there is one."""

    section: str  # <benchmark>/<subset>
    n: int
    spearman: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    pairwise: float | None = None
    best_baseline: str | None = None
    baseline_spearman: float | None = None
    reference_spearman: float | None = None


class CriterionFigures(BaseModel):
    task: str  # the rubric's name, e.g. Persona Consistency
    fingerprint: str  # of the rubric the judge read
    figures: list[Figure]


class Card(BaseModel):
    judge: str
    protocol: str  # Protocol.version
    measured: str  # ISO date
    personagraph: str
    data: str  # what the figures were measured on: full pinned files, or local copies (subsets)
    sample: int | None = None
    criteria: dict[str, CriterionFigures]


def user_cards() -> Path:
    return Path(os.environ.get(CARDS_ENV) or cache_root() / "validity")


def _file_name(judge: str, protocol: str) -> str:
    slug = "".join(c if c.isalnum() or c in "._-" else "-" for c in judge)[:60]
    return f"{slug}-{short_id(judge, protocol)[:12]}.json"


def _read(text: str) -> Card | None:
    try:
        return Card.model_validate_json(text)
    except ValidationError:
        return None  # a damaged or older card is not a reading


def all_cards() -> list[tuple[Card, str]]:
    """Every readable card and where it is: the user's first, then the shipped ones."""
    found: list[tuple[Card, str]] = []
    folder = user_cards()
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            card = _read(path.read_text(encoding="utf-8"))
        except OSError:
            card = None
        if card is not None:
            found.append((card, str(path)))
    for name in _shipped_names():
        if name.endswith(".json") and (card := _read(read_text(f"{SHIPPED}/{name}"))) is not None:
            found.append((card, f"personagraph/{SHIPPED}/{name} (shipped)"))
    return found


def _shipped_names() -> list[str]:
    try:
        return list_dir(SHIPPED)
    except (FileNotFoundError, NotADirectoryError):
        return []


def find_card(judge: str, protocol: Protocol) -> Card | None:
    """The card of this judge spec and protocol version (the user's before a shipped one), or None."""
    return next((c for c, _ in all_cards() if c.judge == judge and c.protocol == protocol.version), None)


def _section_figure(section: str, result: dict[str, Any], judge: str) -> Figure | None:
    rows = result["judges"]
    name = judge + EXPECTED_SUFFIX if judge + EXPECTED_SUFFIX in rows else judge  # probability-weighted first
    row = rows.get(name)
    if row is None or not row["n"]:
        return None
    rho = row["spearman"]
    best = result.get("best_baseline")
    paired = result.get("pairwise", {}).get(name, {})
    pairwise = paired.get("pairwise_accuracy", {}).get("value")
    return Figure(
        section=section,
        n=paired.get("n_pairs", row["n"]),
        spearman=rho["value"],
        ci_low=rho["ci_low"],
        ci_high=rho["ci_high"],
        pairwise=pairwise,
        best_baseline=best,
        baseline_spearman=result["baselines"][best]["spearman"]["value"] if best else None,
        reference_spearman=(result.get("reference") or {}).get("spearman", {}).get("value"),
    )


def cards_from_summary(
    summary: dict[str, Any], protocols: dict[str, Protocol], criteria: dict[str, Criterion]
) -> list[Card]:
    """A card per judge of a finished benchmark meta-eval's summary (``meta_eval.json``'s keys)."""
    record = summary.get("benchmarks") or {}
    full = all(f.get("full_file") for f in record.get("files", []))
    data = "the full pinned files" if full else f"local copies in {record.get('dir')} (not the full files)"
    made = []
    for judge in summary["judges"]:
        by_criterion: dict[str, CriterionFigures] = {}
        for section, about in summary["criteria"].items():
            figure = _section_figure(section, summary["results"][section], judge)
            if figure is None:
                continue
            criterion = criteria[about["criterion"]]
            entry = by_criterion.setdefault(
                criterion.key,
                CriterionFigures(task=criterion.rubric.task, fingerprint=criterion.fingerprint, figures=[]),
            )
            entry.figures.append(figure)
        made.append(
            Card(
                judge=judge,
                protocol=protocols[judge].version,
                measured=date.today().isoformat(),
                personagraph=__version__,
                data=data,
                sample=record.get("sample"),
                criteria=by_criterion,
            )
        )
    return made


def save_cards(
    summary: dict[str, Any], protocols: dict[str, Protocol], criteria: dict[str, Criterion]
) -> list[Path]:
    """Writes each judge's card to the user's cache (atomically: a reader never sees half a card)."""
    folder = user_cards()
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for card in cards_from_summary(summary, protocols, criteria):
        path = folder / _file_name(card.judge, card.protocol)
        handle, temporary = tempfile.mkstemp(dir=folder, prefix=".card.", suffix=".part")
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(card.model_dump_json(indent=2))
        os.replace(temporary, path)
        paths.append(path)
    return paths


def _short(section: str) -> str:
    """``usr-personachat/uses_knowledge`` → ``usr-personachat uses knowledge``."""
    return section.replace("/", " ").replace("_", " ")


def figure_text(figure: Figure) -> str:
    if figure.pairwise is not None:
        return f"{_short(figure.section)} pairwise {figure.pairwise:.2f} (n {figure.n})"
    if figure.spearman is None:
        return f"{_short(figure.section)} ρ — (n {figure.n})"
    ci = (
        ""
        if figure.ci_low is None or figure.ci_high is None
        else f" [{figure.ci_low:+.2f}, {figure.ci_high:+.2f}]"
    )
    return f"{_short(figure.section)} ρ {figure.spearman:+.2f}{ci} (n {figure.n})"


def validity_line(judge: str, protocol: Protocol, criteria: list[str]) -> str:
    """One line on what a judge's scores are worth: its agreement with people on the criteria it judges
    (names or keys) that a card measured for the rubric it reads now, with CI, n and date; or how to
    measure it."""
    how = f"not measured against people: run `personagraph meta-eval --benchmark persona -j {judge}`"
    card = find_card(judge, protocol)
    if card is None:
        return f"{judge} ({protocol.name}): {how}"
    catalogue = CriterionCatalogue()
    parts = []
    for name in criteria:
        current = catalogue.resolve(name)
        figures = None if current is None else card.criteria.get(current.key)
        if figures is None or current is None or figures.fingerprint != current.fingerprint:
            continue
        parts.append(f"{figures.task}: " + ", ".join(figure_text(f) for f in figures.figures))
    if not parts:
        return f"{judge} ({protocol.name}): {how} (its card measured no criterion with these rubrics)"
    sample = f", {card.sample} per subset" if card.sample else ""
    return (
        f"{judge} ({protocol.name}) vs people: "
        + "; ".join(parts)
        + f" — measured {card.measured} on {card.data}{sample}"
    )


def validity_lines(judges: list[str], protocol: str | None, criteria: list[str]) -> dict[str, str]:
    """Each judge's :func:`validity_line` under the protocol a run asks it with (its default when None); a
    run made with a protocol this version no longer has is said to be unmeasured, not an error."""
    lines = {}
    for judge in judges:
        try:
            asked = get_protocol(protocol, judge)
        except PersonagraphError:
            lines[judge] = f"{judge} ({protocol}): not measured against people (no such protocol now)"
            continue
        lines[judge] = validity_line(judge, asked, criteria)
    return lines
