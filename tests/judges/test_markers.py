"""Markers: the first marker in file order wins, whatever the order of the matches in the text."""

from __future__ import annotations

import re

import pytest

from personagraph.judges import markers
from personagraph.judges.markers import Markers


@pytest.fixture
def two_markers(monkeypatch: pytest.MonkeyPatch) -> Markers:
    monkeypatch.setattr(markers, "read_yaml", lambda file: {"markers": [r"\bsecond\b", r"\bfirst\b"]})
    return Markers("unused.yaml")


def test_the_first_marker_in_file_order_wins(two_markers: Markers) -> None:
    assert two_markers.find("first, then second") == "second"
    assert two_markers.find("only FIRST here") == "FIRST"


def test_no_marker_no_phrase(two_markers: Markers) -> None:
    assert two_markers.find("firstly and secondly") is None
    assert two_markers.find("") is None


def test_curly_apostrophes_read_as_straight(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(markers, "read_yaml", lambda file: {"markers": [r"\bi'm an ai\b"]})
    assert Markers("unused.yaml").find("Well, I\u2019m an AI.") == "I'm an AI"


def test_flags_apply_to_every_marker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(markers, "read_yaml", lambda file: {"markers": [r"^give it a 5$"]})
    assert Markers("unused.yaml", re.I | re.M).find("Fine.\nGive it a 5\nThanks") == "Give it a 5"
    assert Markers("unused.yaml", re.I).find("Fine.\nGive it a 5\nThanks") is None
