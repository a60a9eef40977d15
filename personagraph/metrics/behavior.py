"""Behavior alignment of conversational recommender systems (INSPIRED strategies).

* Strategies: the 13 INSPIRED recommendation strategies plus ``no_strategy``, defined in
  ``metrics/strategies.yaml``.
* Labellers: an LLM labeller (structured output, one label per utterance) and a trainable classifier
  (sentence embeddings + scikit-learn logistic regression) fitted on labelled utterances.
* BA(C, H) = 1 when the system's response C and the human's response H share a strategy; a system's BA
  is the mean over its responses, the first system turn of each dialogue excluded.
* Cohen's κ with a bootstrap CI between any labeller and the human labels.

Data: INSPIRED-style TSV, one row per utterance, with ``speaker``, ``text`` and ``expert_label``
(optional ``dialog_id``; ``second_label`` adds a second strategy). Consecutive rows of one speaker form
a turn; a turn's strategies are the union of its rows' labels.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, Field, create_model

from personagraph.embeddings import PACKAGED_MINILM, embed, resolve_model
from personagraph.errors import PersonagraphError
from personagraph.files import read_jsonl
from personagraph.judges.stats import bootstrap_ci, paired_bootstrap_ci
from personagraph.metrics.io import read_table
from personagraph.models import ModelClient
from personagraph.prompts import load_prompt
from personagraph.resources import data_hash, read_yaml
from personagraph.schemas import Seed

STRATEGIES_FILE = "metrics/strategies.yaml"
COLUMNS = ("speaker", "text", "expert_label")
NO_STRATEGY = "no_strategy"


class Strategy(BaseModel):
    """One recommendation strategy: its INSPIRED label, a definition and an example utterance."""

    name: str
    definition: str
    example: str = ""


@lru_cache(maxsize=1)
def load_strategies() -> tuple[Strategy, ...]:
    """The 14 strategies (13 INSPIRED strategies + no_strategy) from the package data file."""
    data = read_yaml(STRATEGIES_FILE)
    return tuple(Strategy.model_validate(entry) for entry in data["strategies"])


def strategy_names() -> tuple[str, ...]:
    """The valid labels, in data-file order."""
    return tuple(strategy.name for strategy in load_strategies())


def normalize_label(label: str) -> str:
    """``"Offer Help"`` / ``"offer-help"`` → ``"offer_help"`` (the data file's spelling)."""
    return "_".join(label.strip().lower().replace("-", " ").split())


def check_label(label: str, where: str) -> str:
    """A normalized label, checked against the 14.

    Raises:
        PersonagraphError: naming ``where`` when the label is not one of the 14 strategies.
    """
    name = normalize_label(label)
    if name not in strategy_names():
        raise PersonagraphError(
            f"{where}: label {label!r} is not one of the 14 strategies ({', '.join(strategy_names())})"
        )
    return name


# --- data --------------------------------------------------------------------------------------------
class Turn(BaseModel):
    """Consecutive utterances of one speaker.

    Attributes:
        dialog_id: the dialogue.
        index: 0-based position of the turn in its dialogue.
        system_index: 1-based position among the dialogue's system turns (0 for the other speaker).
        speaker: as written in the file.
        is_system: spoken by the recommender (the system's role).
        rows: the file rows of its utterances.
        texts: the utterances.
        labels: each utterance's human labels (empty list when unlabelled).
    """

    dialog_id: str
    index: int
    system_index: int = 0
    speaker: str
    is_system: bool
    rows: list[int] = Field(default_factory=list)
    texts: list[str] = Field(default_factory=list)
    labels: list[list[str]] = Field(default_factory=list)

    @property
    def text(self) -> str:
        return " ".join(self.texts)

    @property
    def key(self) -> tuple[str, int]:
        """``(dialog_id, system_index)``: how system responses name the turn they answer."""
        return (self.dialog_id, self.system_index)

    @property
    def label_set(self) -> set[str]:
        return {label for labels in self.labels for label in labels}


class Dialogue(BaseModel):
    """One dialogue's turns, in order."""

    id: str
    turns: list[Turn]

    def context(self, turn_index: int, max_turns: int = 6) -> str:
        """The last ``max_turns`` turns before ``turn_index``, one ``SPEAKER: text`` line each."""
        before = self.turns[max(0, turn_index - max_turns) : turn_index]
        return "\n".join(f"{turn.speaker.upper()}: {turn.text}" for turn in before) or "(start of the dialogue)"


def load_inspired(
    path: str | Path, *, system_speaker: str = "RECOMMENDER", limit: int | None = None
) -> list[Dialogue]:
    """Reads an INSPIRED-style TSV into dialogues of turns.

    Args:
        path: the TSV (``speaker``, ``text``, ``expert_label``; optional ``dialog_id``, ``second_label``).
        system_speaker: the speaker whose turns the system plays (case-insensitive).
        limit: keep only the first ``limit`` dialogues.

    Raises:
        PersonagraphError: missing file or column, empty file, an empty text, a label outside the 14, no
            turn by ``system_speaker`` (each naming the file and row).
    """
    rows = read_table(path, COLUMNS, delimiter="\t")
    dialogues: dict[str, Dialogue] = {}
    system = system_speaker.strip().lower()
    for number, row in rows:
        where = f"{path} row {number}"
        speaker = row["speaker"].strip()
        text = row["text"].strip()
        if not speaker:
            raise PersonagraphError(f"{where}: empty 'speaker'")
        if not text:
            raise PersonagraphError(f"{where}: empty 'text'")
        labels = [check_label(row[column], where) for column in ("expert_label", "second_label")
                  if row.get(column, "").strip()]
        dialog_id = row.get("dialog_id", "").strip() or "1"
        if dialog_id not in dialogues:
            if limit is not None and len(dialogues) >= limit:
                break
            dialogues[dialog_id] = Dialogue(id=dialog_id, turns=[])
        dialogue = dialogues[dialog_id]
        if not dialogue.turns or dialogue.turns[-1].speaker.lower() != speaker.lower():
            is_system = speaker.lower() == system
            system_index = 1 + sum(t.is_system for t in dialogue.turns) if is_system else 0
            dialogue.turns.append(Turn(dialog_id=dialog_id, index=len(dialogue.turns), system_index=system_index,
                                       speaker=speaker, is_system=is_system))
        turn = dialogue.turns[-1]
        turn.rows.append(number)
        turn.texts.append(text)
        turn.labels.append(list(dict.fromkeys(labels)))
    if not any(turn.is_system for dialogue in dialogues.values() for turn in dialogue.turns):
        speakers = sorted({turn.speaker for dialogue in dialogues.values() for turn in dialogue.turns})
        raise PersonagraphError(f"{path}: no row has speaker {system_speaker!r} (speakers: {', '.join(speakers)})")
    return list(dialogues.values())


# --- behavior alignment and agreement -------------------------------------------------------------------
def ba(system: set[str], human: set[str]) -> int:
    """BA(C, H): 1 when the system's and the human's responses share a strategy, else 0."""
    return int(bool(system & human))


class Estimate(BaseModel):
    """A statistic with its bootstrap confidence interval (None where undefined) and sample size."""

    value: float | None
    ci_low: float | None = None
    ci_high: float | None = None
    n: int = 0


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def behavior_alignment(
    pairs: Sequence[tuple[set[str], set[str]]], *, n_resamples: int = 2000, seed: int = 0, confidence: float = 0.95
) -> Estimate:
    """A system's BA: the mean of BA(C, H) over its responses, with a bootstrap CI.

    Args:
        pairs: ``(system_strategies, human_strategies)`` per response (first turns already left out).
        n_resamples: bootstrap resamples.
        seed: bootstrap seed.
        confidence: CI level.
    """
    values = [ba(system, human) for system, human in pairs]
    if not values:
        return Estimate(value=None, n=0)
    low, high = bootstrap_ci(values, np.mean, confidence=confidence, n_resamples=n_resamples, seed=seed,
                             method="percentile")
    return Estimate(value=float(np.mean(values)), ci_low=_finite(low), ci_high=_finite(high), n=len(values))


def cohen_kappa(
    labeller: Sequence[str], human: Sequence[str], *, n_resamples: int = 2000, seed: int = 0,
    confidence: float = 0.95,
) -> Estimate:
    """Cohen's κ between a labeller's and the human labels of the same utterances, with a bootstrap CI.

    Pairs are resampled together (percentile interval); κ is undefined (None) when both label sequences
    are one and the same constant.
    """
    if len(labeller) != len(human):
        raise ValueError(f"{len(labeller)} labeller labels but {len(human)} human labels")
    if not labeller:
        return Estimate(value=None, n=0)
    codes = {name: i for i, name in enumerate(sorted(set(labeller) | set(human)))}
    a = np.array([codes[x] for x in labeller], dtype=float)
    b = np.array([codes[x] for x in human], dtype=float)

    from sklearn.metrics import cohen_kappa_score  # scikit-learn: imported where used (~1 s at start-up)

    def kappa(x: np.ndarray, y: np.ndarray) -> float:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # κ of constant labels: reported as None
            warnings.simplefilter("ignore", UserWarning)  # a resample with a single label
            return float(cohen_kappa_score(x, y))

    value = kappa(a, b)
    low, high = paired_bootstrap_ci(a, b, kappa, confidence=confidence, n_resamples=n_resamples, seed=seed,
                                    method="percentile")
    return Estimate(value=_finite(value), ci_low=_finite(low), ci_high=_finite(high), n=len(a))


# --- labellers ------------------------------------------------------------------------------------------
def label_schema() -> type[BaseModel]:
    """The LLM labeller's reply: one strategy, constrained to the 14 names."""
    names = strategy_names()
    return create_model(
        "StrategyLabel",
        strategy=(Literal[names], Field(description="one strategy name from the list")),  # type: ignore[valid-type]
    )


def strategies_text() -> str:
    """The strategy list as the labeller prompt shows it."""
    return "\n".join(f"- {s.name}: {s.definition} Example: {s.example}" for s in load_strategies())


class LLMLabeller:
    """Labels utterances with an LLM: structured output, one strategy per utterance.

    Args:
        client: the model client (role ``strategy_labeller``).
    """

    def __init__(self, client: ModelClient) -> None:
        self.client = client
        self.name = f"llm:{client.name}"
        self._schema = label_schema()

    async def label(self, context: str, utterance: str) -> str | None:
        """The strategy of one utterance, or None when the model gave no valid label."""
        return (await self.attempt(context, utterance))[0]

    async def attempt(self, context: str, utterance: str) -> tuple[str | None, str | None]:
        """``(strategy, None)``, or ``(None, why)`` when the call failed or gave no valid label."""
        messages = load_prompt("strategy_labeller").messages(
            strategies=strategies_text(), context=context, utterance=utterance
        )
        result = await self.client.structured(messages, self._schema)
        strategy = getattr(result.value, "strategy", None) if result.ok else None
        return (strategy, None) if strategy else (None, result.error or "no valid label")


CLASSIFIER_FORMAT = "personagraph-strategy-classifier"


class StrategyClassifier:
    """Sentence embeddings + logistic regression (scikit-learn), fitted on labelled utterances.

    Saved as JSON (coefficients, classes, embedding model), never as a pickle, so loading a classifier
    file cannot run code.

    Args:
        model: a fitted ``LogisticRegression``.
        embedding_model: the sentence-embedding model it was fitted on (None = packaged MiniLM).
    """

    def __init__(self, model: Any, embedding_model: str | None = None) -> None:
        self.model = model
        self.embedding_model = embedding_model
        self.name = f"classifier:{resolve_model(embedding_model)[1] if embedding_model else PACKAGED_MINILM}"

    @classmethod
    def fit(
        cls, texts: Sequence[str], labels: Sequence[str], *, embedding_model: str | None = None,
        c: float = 1.0, seed: int = 0,
    ) -> StrategyClassifier:
        """Fits on ``texts`` with their strategy ``labels`` (each one of the 14).

        Raises:
            PersonagraphError: fewer than two distinct labels, or a label outside the 14.
        """
        labels = [check_label(label, "training labels") for label in labels]
        if len(set(labels)) < 2:
            raise PersonagraphError("the strategy classifier needs utterances of at least two strategies to fit")
        from sklearn.linear_model import LogisticRegression  # imported where used (~1 s at start-up)

        model = LogisticRegression(C=c, max_iter=2000, random_state=seed)
        model.fit(embed(list(texts), embedding_model), labels)
        return cls(model, embedding_model)

    def predict(self, texts: Sequence[str]) -> list[str]:
        """One strategy per text."""
        if not texts:
            return []
        return [str(label) for label in self.model.predict(embed(list(texts), self.embedding_model))]

    def save(self, path: str | Path) -> None:
        """Writes the classifier as JSON."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        data = {
            "format": CLASSIFIER_FORMAT, "version": 1, "strategies": data_hash(STRATEGIES_FILE),
            "embedding_model": self.embedding_model, "classes": [str(c) for c in self.model.classes_],
            "coef": self.model.coef_.tolist(), "intercept": self.model.intercept_.tolist(),
        }
        path.write_text(json.dumps(data), encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> StrategyClassifier:
        """Reads a classifier written by :meth:`save`.

        Raises:
            PersonagraphError: a missing file, or one that is not a strategy classifier.
        """
        path = Path(path)
        if not path.is_file():
            raise PersonagraphError(f"{path}: no such classifier file (fit one with --fit-classifier)")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError):
            data = None
        if not isinstance(data, dict) or data.get("format") != CLASSIFIER_FORMAT:
            raise PersonagraphError(f"{path}: not a personagraph strategy classifier")
        for label in data["classes"]:
            check_label(label, f"{path}")
        from sklearn.linear_model import LogisticRegression

        model = LogisticRegression()
        model.classes_ = np.array(data["classes"])
        model.coef_ = np.array(data["coef"], dtype=float)
        model.intercept_ = np.array(data["intercept"], dtype=float)
        model.n_features_in_ = model.coef_.shape[1]
        return cls(model, data.get("embedding_model"))


# --- the run ---------------------------------------------------------------------------------------------
KIND = "behavior"


class BehaviorConfig(BaseModel):
    """A behavior-alignment run.

    Attributes:
        dialogues: INSPIRED-style TSV with the human dialogues and their strategy labels.
        labeller: model spec of the LLM labeller (exclusive with ``classifier``).
        classifier: a strategy-classifier JSON file (exclusive with ``labeller``).
        fit_classifier: a labelled TSV to fit the classifier on first (saved to ``classifier``).
        responses: JSONL of the system's responses, ``{"dialog_id", "turn", "response"}``; ``turn`` is the
            1-based position among the dialogue's recommender turns.
        system: model spec that plays the recommender (generates the responses; exclusive with ``responses``).
        system_speaker: the speaker the system plays.
        limit: only the first N dialogues.
        embedding_model: sentence embeddings for the classifier (None = packaged MiniLM).
        seed: bootstrap seed. n_resamples: bootstrap resamples.
        retry_failed: a resumed run asks failed labels and responses again (False keeps them failed).
    """

    dialogues: Path
    labeller: str | None = None
    classifier: Path | None = None
    fit_classifier: Path | None = None
    responses: Path | None = None
    system: str | None = None
    system_speaker: str = "RECOMMENDER"
    limit: int | None = Field(None, ge=1)
    embedding_model: str | None = None
    seed: Seed = 0
    n_resamples: int = Field(2000, ge=100)
    max_tokens: int = Field(128, ge=1)
    retry_failed: bool = True


def load_responses(path: str | Path, dialogues: Sequence[Dialogue]) -> dict[tuple[str, int], str]:
    """Reads system responses ``{"dialog_id", "turn", "response"}`` keyed by (dialogue, recommender turn).

    Raises:
        PersonagraphError: a malformed record, or one naming a dialogue/turn the dialogues file lacks.
    """
    turns = {(t.dialog_id, t.system_index) for d in dialogues for t in d.turns if t.is_system}
    out: dict[tuple[str, int], str] = {}
    for number, record in read_jsonl(path, objects=True, allow_empty=False):
        where = f"{path} line {number}"
        for key in ("dialog_id", "turn", "response"):
            if key not in record:
                raise PersonagraphError(f"{where}: missing field {key!r}")
        turn = record["turn"]
        if not isinstance(turn, int) or isinstance(turn, bool) or turn < 1:
            raise PersonagraphError(f"{where}: 'turn' must be a positive integer (the recommender turn number)")
        if not isinstance(record["response"], str):
            raise PersonagraphError(f"{where}: 'response' must be a string")
        key = (str(record["dialog_id"]), turn)
        if key not in turns:
            raise PersonagraphError(f"{where}: dialogue {key[0]!r} has no recommender turn {turn}")
        out[key] = record["response"]
    return out
