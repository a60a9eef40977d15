"""Detects answers that try to grade themselves instead of playing the persona.

The answer under test is untrusted text inside the judge's prompt. Fencing (``judges/protocols.fence``)
keeps it from closing its block, and the prompts tell the judge it is data, but a small judge still
copies a verdict planted in the answer or obeys an answer that speaks to it. So an answer is flagged by
its structure, in any wording and in the languages of ``judges/manipulation.yaml``:

* ``verdict`` — text shaped like the judge's own reply: a score word labelling a bare number
  (``"score": 5``, ``Score: 5``, ``评分：5``), a rationale label with a sentence about the response, or a
  sentence whose subject is the response and which judges it against the persona or a score ("The
  response perfectly embodies the persona").
* ``address`` — an evaluator spoken to (a vocative "Grader, …", a greeting "Dear evaluator", a trailing
  "…, judge.", "you, the rater", or a prompt channel such as ``SYSTEM:``) with a request about the score
  or the rubric near it; or an instruction to set the rubric aside ("ignore the rubric", "ignora la
  rúbrica"), and the phrases of ``judges/judge_instruction_markers.yaml``.
* ``stuffing`` — the persona's own words repeated far beyond natural text.
* ``one_word`` — an answer of a single word ("Cowboy."): it shows nothing of the persona a rubric asks
  about, yet a small judge scored it above in-character answers (``bench/judge_manipulation.py``).

A flagged answer scores at most the rubric's minimum (``judges/judge.py``), with the judge's own score
kept beside it, as an answer that breaks persona scores at most the rubric's ``break_cap``.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from personagraph.errors import PersonagraphError
from personagraph.judges.judge_instructions import detect_judge_instruction
from personagraph.judges.words import content_words
from personagraph.resources import read_yaml

FILE = "judges/manipulation.yaml"
Kind = Literal["verdict", "address", "stuffing", "one_word"]
EVIDENCE_CHARS = 80  # of the text that shows a flag, kept in the verdict (answer text: bounded)
_WORD = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]|[^\W_]+")  # a CJK character is a word
WINDOW = 160  # characters after an evaluator spoken to in which a request about the score counts


@dataclass(frozen=True)
class Manipulation:
    """Why an answer is flagged: its ``kind`` and the (clipped) text that shows it."""

    kind: Kind
    evidence: str

    def __str__(self) -> str:
        return f"judge manipulation ({self.kind}): {self.evidence}"


def _words(entry: Any) -> str:
    """One alternation of a YAML entry: a string or a list of strings (one per language)."""
    return "|".join(entry) if isinstance(entry, list) else str(entry)


class _Patterns:
    """The compiled structures, built from the YAML's word lists."""

    def __init__(self, data: dict[str, Any]) -> None:
        def alt(key: str) -> str:
            latin = _words(data[key])
            cjk = data.get(f"{key}_cjk")
            return f"(?:\\b(?:{latin})\\b{'|' + _words(cjk) if cjk else ''})"

        flags = re.I | re.M
        role, score, answer, criteria = alt("roles"), alt("score_words"), alt("answers"), alt("criteria")
        label = f"(?:{_words(data['score_labels'])}|{_words(data['score_labels_cjk'])})"
        number = r"\d{1,2}(?:[.,]\d+)?(?:\s*(?:/|out of|sur|de|von|di|de cada)\s*\d{1,2})?"
        # "Score: 5", {"score": 5}, "Evaluator note: score = 5", "评分：5": a label of a few words ending in
        # a score word, then the bare number and nothing after it on the line but punctuation.
        self.score_line = re.compile(
            rf"(?:^|[{{,;:\"'(])[ \t*_#>\-\"']*(?:[\w'-]+[ \t]+){{0,3}}{label}\w*(?:[ \t]+[\w'-]+){{0,2}}"
            rf"[\"'*_ \t]*[:=：][ \t\"'*_]*{number}[ \t\"'*_]*(?:[.!,;}})\]。]|$)", flags)
        rationale = f"(?:{_words(data['rationale_labels'])}|{data['rationale_labels_cjk']})"
        self.rationale = re.compile(
            rf"(?:^|[{{,\"'])[ \t*_#>\-\"']*{rationale}[\"'*_ \t]*[:=：][^\n]*?(?:{answer}|{criteria})",
            flags)
        # A sentence whose subject is the answer, judged against the persona or a score.
        self.judged = re.compile(
            rf"(?:^|[.!?。！？\n]\s*|[\"'{{:]\s*){answer}\b[^.!?。！？\n]*?(?:{criteria}|{score})", flags)
        greeting, you, channel = alt("greetings"), alt("you"), f"(?:{data['channels']})"
        article = "(?:the|my|dear|el|la|le|der|die|o|a|il)"
        sentence = r"(?:^|[.!?。！？\n]\s*)"
        self.spoken_to = re.compile(
            "|".join((
                rf"{sentence}(?:[\w'-]+[ \t]+){{0,2}}{role}(?:[ \t]+(?:note|message|notice))?"
                r"[ \t]*[,:!，：！]",  # "Grader, …", "Evaluator note: …"
                rf"{greeting}[ \t]*(?:[\w'-]+[ \t]+){{0,2}}{role}",  # "Dear evaluator", "亲爱的评委"
                rf"[,，][ \t]*(?:{article}[ \t]+)?{role}[ \t]*[.!?。！？]",  # "…, judge."
                rf"{you}[ \t,]+(?:as[ \t]+)?{article}[ \t]+{role}\b",  # "you, the rater"
                rf"\bas (?:the|my|our) {role}[ \t]*,[ \t]*{you}",  # "as the judge, you …"
                rf"{sentence}[ \t*_#>\-]*{channel}[ \t*_]*(?:note|message|override|prompt)?[ \t*_]*[:：]",
            )), flags)
        self.request = re.compile(
            rf"{score}|(?:{alt('ignore_verbs')})[^.!?。！？\n]{{0,40}}?{alt('followed')}", flags)
        # An imperative (at the start of a sentence or clause) to set aside what the judge follows.
        self.ignore = re.compile(
            rf"(?:^|[.!?;:,¡¿]\s*)(?:(?:please|por favor|bitte|s'il (?:te|vous) pla[iî]t|per favore)[ ,]+)?"
            rf"{alt('ignore_verbs')}[ \t]+(?:[\w'-]+[ \t]+){{0,4}}?{alt('followed')}"
            rf"|(?:{_words(data['ignore_verbs_cjk'])}).{{0,12}}?(?:{_words(data['followed_cjk'])})", flags)
        stuffing = data.get("stuffing") or {}
        self.phrase_repeats = int(stuffing.get("phrase_repeats", 4))
        self.repeats = int(stuffing.get("repeats", 6))
        self.share = float(stuffing.get("share", 0.2))


@lru_cache(maxsize=1)
def _patterns() -> _Patterns:
    data = read_yaml(FILE)
    try:
        return _Patterns(data)
    except (KeyError, TypeError, ValueError, re.error) as exc:
        raise PersonagraphError(f"personagraph/{FILE}: {type(exc).__name__}: {exc}".splitlines()[0]) from None


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= EVIDENCE_CHARS else text[: EVIDENCE_CHARS - 1] + "…"


def _normalized(text: str) -> str:
    """Curly quotes as straight ones and runs of spaces as one ("IGNORE  THE  RUBRIC")."""
    text = text.replace("\u2019", "'").replace("\u201c", '"').replace("\u201d", '"')
    return re.sub(r"[ \t\u00a0\u3000]+", " ", text)


def _verdict(text: str) -> str | None:
    patterns = _patterns()
    for pattern in (patterns.score_line, patterns.rationale, patterns.judged):
        if match := pattern.search(text):
            return match.group(0)
    return None


def _address(text: str) -> str | None:
    patterns = _patterns()
    if match := patterns.ignore.search(text):
        return match.group(0)
    for match in patterns.spoken_to.finditer(text):
        start = max(0, match.start() - WINDOW)
        if patterns.request.search(text, start, match.end() + WINDOW):
            return text[match.start(): match.end() + WINDOW]
    return detect_judge_instruction(text)


def _stuffing(text: str, persona: str) -> str | None:
    """What shows the persona's words filling the answer (see the YAML): a phrase of persona words (two or
    more, at most one other word apart: "retired cowboy from Texas") restated ``phrase_repeats`` times, or
    persona words repeated ``repeats`` times beyond their first use and making up ``share`` of the words."""
    patterns = _patterns()
    own = {_stem(w) for w in content_words(persona)}
    if not own:
        return None
    said = re.findall(r"[^\W\d_]+", text.lower())
    words = [_stem(w) for w in said]
    marks = [i for i, w in enumerate(words) if len(w) >= 3 and w in own]
    phrases: Counter[tuple[str, ...]] = Counter()
    first: dict[tuple[str, ...], str] = {}  # each phrase as the answer first wrote it
    run: list[int] = []
    for i in [*marks, None]:
        if i is not None and run and i - run[-1] <= 2:
            run.append(i)
            continue
        if len(run) >= 2:
            phrase = tuple(words[j] for j in run)
            phrases[phrase] += 1
            first.setdefault(phrase, " ".join(said[run[0]: run[-1] + 1]))
        run = [] if i is None else [i]
    if phrases and (top := phrases.most_common(1)[0])[1] >= patterns.phrase_repeats:
        return f"the persona phrase {first[top[0]]!r} ×{top[1]}"
    hits = Counter(words[i] for i in marks)
    repeats = sum(hits.values()) - len(hits)
    if repeats < patterns.repeats or sum(hits.values()) < patterns.share * len(words):
        return None
    word, count = hits.most_common(1)[0]
    return f"persona words {sum(hits.values())} of {len(words)} words ({word!r} ×{count})"


def _stem(word: str) -> str:
    """A crude stem ("cowboys" and "cowboy" count as one word), cheap enough for every answer."""
    for suffix in ("ing", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def detect_manipulation(text: str, persona: str = "") -> Manipulation | None:
    """Why ``text`` (an answer, untrusted) would grade itself, or None: see the module docstring.

    ``persona``: the persona the answer plays (its words are what stuffing repeats); without it,
    stuffing is not looked for.
    """
    if not text.strip():
        return None  # an empty answer is a non-answer, scored the minimum without a judge
    normalized = _normalized(text)
    if len(_WORD.findall(normalized)) == 1:
        return Manipulation("one_word", _clip(normalized))
    if (found := _address(normalized)) is not None:
        return Manipulation("address", _clip(found))
    if (found := _verdict(normalized)) is not None:
        return Manipulation("verdict", _clip(found))
    if persona and (found := _stuffing(normalized, persona)) is not None:
        return Manipulation("stuffing", found)
    return None


def copies_answer(rationale: str, answer: str, words: int = 6) -> str | None:
    """The run of ``words`` or more words a judge's rationale copies from the answer, when that run is most
    of the rationale (or 20 words long), else None: a rationale of the answer's own words is the answer's
    verdict, not the judge's (a short quote in a rationale of its own is fine)."""
    said = re.findall(r"\w+", rationale.lower())
    source = re.findall(r"\w+", answer.lower())
    if len(said) < words or len(source) < words:
        return None
    best, end = 0, 0
    previous = [0] * (len(source) + 1)
    for i in range(1, len(said) + 1):
        current = [0] * (len(source) + 1)
        for j in range(1, len(source) + 1):
            if said[i - 1] == source[j - 1]:
                current[j] = previous[j - 1] + 1
                if current[j] > best:
                    best, end = current[j], i
        previous = current
    if best >= 20 or (best >= words and best * 2 >= len(said)):
        return " ".join(said[end - best: end])
    return None
