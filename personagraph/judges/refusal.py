"""Detects answers where the agent breaks persona: AI disclosures and refusals to role-play."""

from __future__ import annotations

from personagraph.judges.markers import Markers

MARKERS_FILE = "judges/refusal_markers.yaml"
_MARKERS = Markers(MARKERS_FILE)


def detect_refusal(text: str) -> str | None:
    """Returns the matched persona-break phrase, or None when the answer stays in character."""
    return _MARKERS.find(text)
