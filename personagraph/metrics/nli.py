"""Natural-language inference through ``transformers.AutoModelForSequenceClassification``.

Any NLI classifier works (an MNLI/SNLI/DNLI fine-tune, by Hugging Face id in the local cache or by local
folder): pairs are encoded together (``tokenizer(premise, hypothesis)``) and the label order comes from the
model's ``config.id2label``. No NLI model ships with personagraph; name one with ``--nli-model`` or the
``PERSONAGRAPH_NLI_MODEL`` environment variable.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from enum import StrEnum
from functools import lru_cache
from typing import Any

from personagraph.embeddings import quiet_transformers
from personagraph.errors import PersonagraphError

NLI_ENV = "PERSONAGRAPH_NLI_MODEL"


class Entailment(StrEnum):
    """The three NLI outcomes."""

    ENTAILMENT = "entailment"
    NEUTRAL = "neutral"
    CONTRADICTION = "contradiction"


def _outcome(name: str) -> Entailment | None:
    key = name.strip().lower()
    if key.startswith("entail"):
        return Entailment.ENTAILMENT
    if key.startswith("neutral"):
        return Entailment.NEUTRAL
    if key.startswith("contradict"):
        return Entailment.CONTRADICTION
    return None


def label_order(id2label: dict[Any, str], model: str) -> list[Entailment]:
    """Maps a classifier's ``id2label`` to NLI outcomes, index by index.

    Raises:
        PersonagraphError: when the labels are not exactly entailment, neutral and contradiction (e.g. the
            generic ``LABEL_0``… of a model saved without label names).
    """
    ordered = [id2label[key] for key in sorted(id2label, key=int)]
    outcomes = [_outcome(name) for name in ordered]
    if None in outcomes or len(set(outcomes)) != 3 or len(outcomes) != 3:
        raise PersonagraphError(
            f"NLI model {model}: config.id2label {dict(enumerate(ordered))} does not name the three labels "
            "entailment, neutral and contradiction; use a 3-way NLI classifier with named labels"
        )
    return [outcome for outcome in outcomes if outcome is not None]


def configured_nli_model(model: str | None) -> str:
    """The NLI model to use: ``model`` if given, else ``$PERSONAGRAPH_NLI_MODEL``.

    Raises:
        PersonagraphError: when neither names one.
    """
    chosen = model or os.environ.get(NLI_ENV, "").strip()
    if not chosen:
        raise PersonagraphError(
            "no NLI model configured: c_score and ue_score need a 3-way NLI classifier — pass --nli-model "
            f"ID_OR_FOLDER or set {NLI_ENV} (nothing is downloaded; the model must be on this machine)"
        )
    return chosen


class NLIModel:
    """A loaded NLI classifier.

    Args:
        model: a local folder or a model id in the local Hugging Face cache.
        batch_size: pairs per forward pass.
        max_length: token limit per pair (longer pairs are truncated, premise first).
    """

    def __init__(self, model: str, *, batch_size: int = 16, max_length: int = 256) -> None:
        from transformers import AutoModelForSequenceClassification, AutoTokenizer  # heavy: NLI only

        quiet_transformers()
        self.model_name = model
        self.batch_size = batch_size
        self.max_length = max_length
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(model, local_files_only=True)
            self.model = AutoModelForSequenceClassification.from_pretrained(model, local_files_only=True)
        except (OSError, ValueError) as exc:
            raise PersonagraphError(
                f"NLI model {model}: cannot load it as a sequence classifier ({type(exc).__name__}: "
                f"{str(exc).splitlines()[0] if str(exc) else ''})"
            ) from None
        self.model.eval()
        self.labels = label_order(self.model.config.id2label, model)

    def predict(self, pairs: Sequence[tuple[str, str]]) -> list[Entailment]:
        """The NLI outcome of each ``(premise, hypothesis)`` pair, encoded together."""
        import torch  # heavy: NLI only

        outcomes: list[Entailment] = []
        for start in range(0, len(pairs), self.batch_size):
            batch = pairs[start : start + self.batch_size]
            encoded = self.tokenizer(
                [premise for premise, _ in batch], [hypothesis for _, hypothesis in batch],
                padding=True, truncation="longest_first", max_length=self.max_length, return_tensors="pt",
            )
            with torch.inference_mode():
                logits = self.model(**encoded).logits
            outcomes.extend(self.labels[int(index)] for index in logits.argmax(dim=-1).tolist())
        return outcomes


@lru_cache(maxsize=2)
def load_nli(model: str | None = None) -> NLIModel:
    """The configured NLI model, loaded once per process (see :func:`configured_nli_model`)."""
    return NLIModel(configured_nli_model(model))
