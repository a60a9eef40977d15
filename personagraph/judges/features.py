"""Text evidence about a response, computed without an LLM: the baselines every judge must beat and
the text features the ``evidence`` judging protocol weighs beside its LLM answers.

Every function reads ``(persona, question, response)``. The question may be a dialogue with
``Speaker: text`` lines; the response then answers its last line, so the *partner* is that line's
speaker, and words the partner said do not count as knowledge the response brings.

Baselines (:data:`BASELINES`, reported by ``meta-eval``, ``judge-check`` and
``bench/judge_protocols.py`` beside every judge figure):

* ``length`` — the response's length in words;
* ``word_overlap`` — the most content words the response shares with one persona fact (the keyword
  counter that solves the persona-swap set);
* ``embedding_similarity`` — the cosine of the response and the persona under the packaged MiniLM.

Beside them, the likelihood features (:data:`LIKELIHOOD`) read how much the persona and the dialogue raise
the packaged Qwen2.5-Coder-1.5B's log-likelihood of the response (``personagraph/likelihood.py``).

Content words are lower-case words of three letters or more that are not English stop words
(scikit-learn's list); :func:`stems` reduces them with the Porter stemmer ("kayaking" and "kayaker"
meet) for the features, while ``word_overlap`` stays the plain keyword counter.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from personagraph.judges.protocols import DIALOGUE_LINES, persona_facts
from personagraph.judges.words import WORD, stems

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_SPEAKER = re.compile(r"^\s*([A-Za-z][\w .'-]{0,30}):\s?(.*)$")


@dataclass(frozen=True)
class Text:
    """One response to judge, with what it is judged against."""

    persona: str
    question: str
    response: str


def _turns(question: str) -> tuple[list[str], list[re.Match[str] | None]]:
    """The question's non-empty lines, stripped, and each one's ``Speaker: text`` match (None where a line
    is not one)."""
    lines = [line.strip() for line in question.splitlines() if line.strip()]
    return lines, [_SPEAKER.match(line) for line in lines]


def partner_text(question: str) -> str:
    """What the other side said: in a ``Speaker: text`` dialogue, the lines of the last line's speaker;
    otherwise the whole question."""
    lines, turns = _turns(question)
    if not lines or turns[-1] is None:
        return question
    partner = turns[-1].group(1)
    return "\n".join(t.group(2) for t in turns if t is not None and t.group(1) == partner)


def last_turn(question: str) -> str:
    """The line the response answers (its speaker's name removed)."""
    lines, turns = _turns(question)
    if not lines:
        return ""
    return turns[-1].group(2) if turns[-1] else lines[-1]


def _words(text: str) -> list[str]:
    return WORD.findall(text.lower())


# --- the features --------------------------------------------------------------------------------
def length(t: Text) -> float:
    """The response's length in words."""
    return float(len(t.response.split()))


def word_overlap(t: Text) -> float:
    """The most content words the response shares with one persona fact, matched by stem ("horses" and
    "horse" are one word): a stronger baseline than exact words, and the judges' own text features match
    by stem too."""
    words = stems(t.response)
    return float(max(len(words & stems(fact)) for fact in persona_facts(t.persona)))


ATTITUDE_WORDS = frozenset({"love", "like", "enjoy", "hate", "dislike", "favorite", "favourite", "prefer",
                            "fond"})
"""Words that frame a persona fact rather than state it ("I *love* dogs", "my *favorite* color is red"): "i
love to travel" shares "love" with "I love dogs" and uses nothing the persona knows."""


def _brought_stems(t: Text, text: str, leave_out: frozenset[str] = frozenset()) -> float:
    """Persona stems ``text`` uses that the partner did not say (echoing the partner's words is not using
    one's persona), less the stems of ``leave_out``."""
    return float(len((stems(text) & stems(t.persona)) - stems(partner_text(t.question)) - leave_out))


def _statements(text: str) -> str:
    """The text's sentences that are not questions."""
    return " ".join(s for s in sentences(text) if not s.rstrip().endswith("?"))


def knowledge_stems(t: Text) -> float:
    """The persona knowledge a reply states: persona stems in its statements (a question back to the
    partner, "what is your favorite food ?", asks about a topic, it does not use the persona's knowledge)
    that the partner did not say, attitude words (:data:`ATTITUDE_WORDS`) left out."""
    return _brought_stems(t, _statements(t.response), leave_out=stems(" ".join(ATTITUDE_WORDS)))


def repetition(t: Text) -> float:
    """Word pairs the response repeats ("i am a student , but i am a student"): degenerate replies."""
    words = _words(t.response)
    pairs = list(zip(words, words[1:], strict=False))
    return float(len(pairs) - len(set(pairs)))


# --- embedding features: the highest cosine (packaged MiniLM) over the pairs of texts each names -----
def _response_and_persona(t: Text) -> list[tuple[str, str]]:
    """Cosine of the response and the persona (packaged MiniLM)."""
    return [(t.response, t.persona)]


def sentences(text: str) -> list[str]:
    """The text cut after each ``.``, ``!`` or ``?`` ("i ride horses . i live in texas" is two)."""
    return [s for s in _SENTENCE_END.split(text.strip()) if s.strip()] or [text]


def _each_sentence_and_each_fact(t: Text) -> list[tuple[str, str]]:
    """The highest cosine of one response sentence and one persona fact (packaged MiniLM): a reply that
    states a fact in one of its sentences is diluted when it is embedded whole."""
    return [(part, fact) for part in sentences(t.response) for fact in persona_facts(t.persona)]


EMBEDDED: dict[str, Callable[[Text], list[tuple[str, str]]]] = {
    "embedding_similarity": _response_and_persona,
    "sentence_fact_similarity": _each_sentence_and_each_fact,
}
"""Each embedding feature's pairs of texts; its value is the highest cosine among them."""


def _vectors(names: Sequence[str], texts: Sequence[Text]) -> dict[str, np.ndarray]:
    """Unit vectors of every text the named embedding features pair, encoded in one batch (one forward
    pass per 32 texts, where one call per feature cost 2.5x the CPU for a verdict's few texts)."""
    from personagraph.embeddings import encode  # torch: only when an embedding feature is computed

    unique = list(dict.fromkeys(part or " " for name in names for t in texts
                                for pair in EMBEDDED[name](t) for part in pair))
    return dict(zip(unique, encode(unique), strict=True)) if unique else {}


def _max_cosines(name: str, texts: Sequence[Text], vectors: dict[str, np.ndarray]) -> list[float]:
    return [max(float(vectors[a or " "] @ vectors[b or " "]) for a, b in EMBEDDED[name](t)) for t in texts]


# --- likelihood features: how the packaged LM's log-likelihood of the response moves (likelihood.py) ---
def _dialogue_and_responder(t: Text) -> tuple[str, str]:
    """The question's last :data:`DIALOGUE_LINES` dialogue lines and the name the response is said under:
    the other speaker of a ``Speaker: text`` dialogue, ``Answer`` after a plain question (``Question: …``)."""
    lines, turns = _turns(t.question)
    if not lines or turns[-1] is None:
        return f"Question: {' '.join(lines)}", "Answer"
    last = turns[-1].group(1)
    others = [m.group(1) for m in turns if m is not None and m.group(1) != last]
    return "\n".join(lines[-DIALOGUE_LINES:]), (others[-1] if others else "Reply")


def _likelihood_prompts(t: Text) -> tuple[str, str, str]:
    """The three prefixes the response is scored after: persona + dialogue, dialogue, nothing."""
    dialogue, responder = _dialogue_and_responder(t)
    return (f"Persona of {responder}: {t.persona}\n\n{dialogue}\n{responder}:", f"{dialogue}\n{responder}:",
            f"{responder}:")


@dataclass(frozen=True)
class EngineReading:
    """What the embedded model's engine reads of one response: per token of the response, its
    log-probability (nats) after each prefix of :func:`_likelihood_prompts` (the same tokens three times,
    so the arrays align token by token), and its answer to :func:`_character_fit_messages`."""

    with_persona: np.ndarray
    with_dialogue: np.ndarray
    alone: np.ndarray
    character_fit: float


PROFILE_CHARS = 6000  # of a persona the character-fit question shows: its prompt stays within a slot


def _character_fit_messages(t: Text) -> list[dict[str, str]]:
    """The question whether the character the persona describes could say the response
    (``prompts/character_fit.yaml``)."""
    from personagraph.prompts import load_prompt

    _, responder = _dialogue_and_responder(t)
    return load_prompt("character_fit").messages(name=responder, persona=t.persona[:PROFILE_CHARS],
                                                 asked=last_turn(t.question), answer=t.response.strip())


async def engine_readings(texts: Sequence[Text], *, passes: bool = True,
                          fit: bool = True) -> list[EngineReading]:
    """Per text, the embedded model's :class:`EngineReading`, its calls concurrent (the engine batches
    them): the three likelihood passes unless ``passes`` is False (then empty arrays), the character-fit
    question unless ``fit`` is False (then NaN)."""
    from personagraph.likelihood import continuation_logprobs, yes_probability  # the engine, when needed

    pairs = [(prefix, f" {t.response.strip()}") for t in texts for prefix in _likelihood_prompts(t)]

    async def likelihoods() -> list[np.ndarray]:
        return await continuation_logprobs(pairs) if passes else [np.zeros(0)] * len(pairs)

    async def fits() -> list[float]:
        if not fit:
            return [float("nan")] * len(texts)
        return list(await asyncio.gather(*(yes_probability(_character_fit_messages(t)) for t in texts)))

    values, answers = await asyncio.gather(likelihoods(), fits())
    return [EngineReading(*values[3 * i:3 * i + 3], character_fit=answers[i]) for i in range(len(texts))]


LIKELIHOOD: dict[str, Callable[[EngineReading], float]] = {
    "persona_pmi": lambda lp: float(lp.with_persona.sum() - lp.with_dialogue.sum()),
    "dialogue_pmi": lambda lp: float(lp.with_dialogue.sum() - lp.alone.sum()),
    "response_loglik": lambda lp: float(lp.with_persona.mean()) if lp.with_persona.size else 0.0,
    "persona_gain": lambda lp: float(np.maximum(lp.with_persona - lp.with_dialogue, 0).sum()),
    "character_fit": lambda lp: lp.character_fit,
}
"""The features read from the embedded model's engine (:class:`EngineReading`). What knowing the persona
(``persona_pmi``: log P(response | persona, dialogue) − log P(response | dialogue)) and the dialogue
(``dialogue_pmi``: log P(response | dialogue) − log P(response)) add to the packaged Qwen2.5-Coder-1.5B's
log-likelihood of the response, in nats: the first rises with persona knowledge the reply uses,
paraphrased or not, and falls where the reply contradicts the persona (its words are less likely after a
persona that says otherwise); the second rises with a reply that follows from the dialogue (a generic or
off-topic one is as likely without it). ``persona_gain`` sums only the tokens the persona makes likelier;
``response_loglik`` is the mean log-probability per token after persona and dialogue. ``character_fit`` is
the model's P(Yes) that the character could say the response (the check that sees a contradicted fact).
What each adds to the fitted model: docs/benchmarks.md#fitting-the-evidence-model."""

# The features read from the text alone, by name; with EMBEDDED and LIKELIHOOD, every feature there is.
PER_TEXT: dict[str, Callable[[Text], float]] = {
    "length": length,
    "word_overlap": word_overlap,
    "knowledge_stems": knowledge_stems,
    "repetition": repetition,
}
FEATURES: tuple[str, ...] = (*PER_TEXT, *EMBEDDED, *LIKELIHOOD)
BASELINES: tuple[str, ...] = ("length", "word_overlap", "embedding_similarity")
"""The trivial scorers beside every judge figure: a judge that does not beat them is not worth running."""


def require(names: Iterable[str]) -> None:
    """Raises when a named feature cannot be computed here: the likelihood features need the weights of the
    embedded 1.5B (the ``local`` extra)."""
    if any(name in LIKELIHOOD for name in names):
        from personagraph.likelihood import require_installed

        require_installed()


def prepare(names: Iterable[str]) -> None:
    """Starts loading, in the background, the model the named likelihood features read (a few seconds of
    CPU: at the start of a run a core is still idle while the engines load)."""
    if any(name in LIKELIHOOD for name in names):
        from personagraph.likelihood import load_soon

        load_soon()


def compute(names: Sequence[str], texts: Sequence[Text]) -> dict[str, list[float]]:
    """The named text and embedding features of every text, in order (the likelihood features, which ask
    the engine, are :func:`acompute`'s)."""
    unknown = [n for n in names if n not in FEATURES or n in LIKELIHOOD]
    if unknown:
        kind = "a likelihood feature (acompute)" if unknown[0] in LIKELIHOOD else "unknown text feature"
        raise KeyError(f"{kind} {unknown[0]!r} (known: {', '.join(FEATURES)})")
    vectors = _vectors([n for n in names if n in EMBEDDED], texts)  # one batch for all embedding features
    return {name: (_max_cosines(name, texts, vectors) if name in EMBEDDED
                   else [PER_TEXT[name](t) for t in texts]) for name in names}


async def acompute(names: Sequence[str], texts: Sequence[Text]) -> dict[str, list[float]]:
    """Every named feature of every text, in order: the text and embedding ones off the event loop, the
    likelihood ones from the embedded model's engine."""
    unknown = [n for n in names if n not in FEATURES]
    if unknown:
        raise KeyError(f"unknown text feature {unknown[0]!r} (known: {', '.join(FEATURES)})")
    local = [n for n in names if n not in LIKELIHOOD]
    values = await asyncio.to_thread(compute, local, texts) if local else {}
    if len(local) < len(names):
        wanted = [n for n in names if n in LIKELIHOOD]
        likelihoods = await engine_readings(texts, passes=any(n != "character_fit" for n in wanted),
                                            fit="character_fit" in wanted)
        values.update({n: [LIKELIHOOD[n](lp) for lp in likelihoods] for n in names if n in LIKELIHOOD})
    return {name: values[name] for name in names}
