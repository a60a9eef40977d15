"""Detects answers where the agent breaks persona: AI disclosures and refusals to role-play."""

from __future__ import annotations

import re
from functools import lru_cache

from personagraph.resources import read_yaml

MARKERS_FILE = "judges/refusal_markers.yaml"


@lru_cache(maxsize=1)
def _patterns() -> tuple[re.Pattern[str], ...]:
    markers = read_yaml(MARKERS_FILE)["markers"]
    return tuple(re.compile(marker, re.I) for marker in markers)


def detect_refusal(text: str) -> str | None:
    """Returns the matched persona-break phrase, or None when the answer stays in character."""
    normalized = text.replace("\u2019", "'")
    for pattern in _patterns():
        if match := pattern.search(normalized):
            return match.group(0)
    return None
