"""Phrase markers: regexes from a packaged YAML file, and the first of them that matches a text."""

from __future__ import annotations

import re
from functools import cached_property

from personagraph.resources import read_yaml


class Markers:
    """The ``markers`` of a packaged YAML file (``resources.read_yaml``), compiled once with ``flags``.

    :meth:`find` returns the match of the first marker, in file order, that matches anywhere in the text.
    Most texts match none, so the markers are first tried together, as one alternation: a text it does not
    match is matched by no marker, in one pass over it instead of one per marker.
    """

    def __init__(self, file: str, flags: re.RegexFlag = re.I) -> None:
        self.file = file
        self.flags = flags

    @cached_property
    def _patterns(self) -> tuple[re.Pattern[str], ...]:
        return tuple(re.compile(marker, self.flags) for marker in read_yaml(self.file)["markers"])

    @cached_property
    def _any(self) -> re.Pattern[str]:
        return re.compile("|".join(f"(?:{p.pattern})" for p in self._patterns), self.flags)

    def find(self, text: str) -> str | None:
        """The phrase the first matching marker finds in ``text`` (curly apostrophes read as straight
        ones), or None."""
        normalized = text.replace("\u2019", "'")
        if self._any.search(normalized) is None:
            return None
        for pattern in self._patterns:
            if match := pattern.search(normalized):
                return match.group(0)
        return None  # unreachable: the alternation matched, so one of its markers does
