"""Words of an English text as the judges' features and checks count them: content words (three letters or
more, not stop words) and their Porter stems."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

WORD = re.compile(r"[a-z]+")


def content_words(text: str) -> frozenset[str]:
    """Lower-case words of three letters or more that are not English stop words."""
    stop_words = _stop_words()
    return frozenset(w for w in WORD.findall(text.lower()) if len(w) >= 3 and w not in stop_words)


@lru_cache(maxsize=1)
def _stop_words() -> frozenset[str]:
    """scikit-learn's English stop words, imported when first needed: importing scikit-learn costs about a
    second (it loads scipy and pandas), which every command would pay at start-up."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return ENGLISH_STOP_WORDS


@lru_cache(maxsize=1)
def _stemmer() -> Any:  # nltk's Porter stemmer needs no downloaded data
    from nltk.stem import PorterStemmer  # only when a feature is computed

    return PorterStemmer()


def stems(text: str) -> frozenset[str]:
    """The Porter stems of :func:`content_words`."""
    stem = _stemmer().stem
    return frozenset(stem(w) for w in content_words(text))
