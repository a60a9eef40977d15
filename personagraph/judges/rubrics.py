"""Rubric data files (``judges/rubrics/<key>.yaml``) and their text as shown to judges."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import yaml
from pydantic import BaseModel, ValidationError

from personagraph.errors import PersonagraphError
from personagraph.resources import data_hash, read_yaml


class Rubric(BaseModel):
    """A 1–5 rubric: what is judged, explicit criteria per score, and rules for every score."""

    task: str
    scale: tuple[int, int] = (1, 5)
    criterion: str
    scores: dict[int, str]
    guidance: str = ""
    break_cap: int | None = None  # the highest score for an answer flagged as a persona break
    version: str = "1"

    def text(self) -> str:
        """The rubric as the judge reads it (fixed sections, static across items)."""
        lines = [f"What to evaluate: {self.criterion.strip()}", "", "Scoring criteria:"]
        lines += [f"Score {score}: {self.scores[score].strip()}" for score in sorted(self.scores)]
        if self.guidance.strip():
            lines += ["", f"Rules: {self.guidance.strip()}"]
        return "\n".join(lines)


def _parse(data: object, where: str, version: str) -> Rubric:
    try:
        rubric = Rubric.model_validate({**data, "version": version} if isinstance(data, dict) else data)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise PersonagraphError(f"{where}: {'.'.join(map(str, first['loc']))}: {first['msg']}") from None
    low, high = rubric.scale
    if sorted(rubric.scores) != list(range(low, high + 1)):
        raise PersonagraphError(f"{where}: scores must cover {low}..{high}, found {sorted(rubric.scores)}")
    if rubric.break_cap is not None and not low <= rubric.break_cap <= high:
        raise PersonagraphError(f"{where}: break_cap must be within {low}..{high}, got {rubric.break_cap}")
    return rubric


@cache
def load_rubric(key: str) -> Rubric:
    """Loads a packaged rubric by key (e.g. ``expected_action``)."""
    path = f"judges/rubrics/{key}.yaml"
    data = read_yaml(path)
    return _parse(data, f"personagraph/{path}", f"{data.get('version', 1)}-{data_hash(path)}")


def load_rubric_file(path: Path) -> Rubric:
    """Loads a user's rubric file (same format as the packaged ones)."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise PersonagraphError(f"{path}: cannot read rubric ({exc.__class__.__name__})") from None
    return _parse(data, str(path), str((data or {}).get("version", 1)) if isinstance(data, dict) else "1")
