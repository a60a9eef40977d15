"""Fluency against a reference: ROUGE-1/2/L (rouge-score), METEOR (nltk), BERTScore (bert-score).

* ROUGE: F-measures of Google's ``rouge-score`` with its default tokenizer (lower-cased alphanumerics),
  no stemming unless asked.
* METEOR: ``nltk.translate.meteor_score`` on whitespace tokens, as PersoBench computes it. It needs the
  WordNet data (``scripts/install_wordnet.sh`` installs it without the NLTK downloader).
* BERTScore: ``bert_score.BERTScorer`` with a configurable model. The offline default is the packaged
  all-MiniLM-L6-v2 at layer 6 (its last); such numbers are not comparable with the roberta-large
  figures papers report, so every result carries the model that produced it (:attr:`BertScore.label`).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

from pydantic import BaseModel

from personagraph.embeddings import PACKAGED_MINILM, quiet_transformers, resolve_model
from personagraph.errors import PersonagraphError
from personagraph.metrics.text import tokens

if TYPE_CHECKING:
    from bert_score import BERTScorer  # heavy (torch): only for BERTScore
    from rouge_score.rouge_scorer import RougeScorer

PACKAGED_BERTSCORE_LAYERS = 6
"""all-MiniLM-L6-v2 has 6 layers; BERTScore takes the last one for it."""


class RougeScores(BaseModel):
    """ROUGE F-measures of one response against its reference."""

    rouge1: float
    rouge2: float
    rougeL: float


@lru_cache(maxsize=2)
def _rouge_scorer(use_stemmer: bool) -> RougeScorer:
    from rouge_score import rouge_scorer  # metric libraries load when a metric is asked for

    return rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=use_stemmer)


def rouge(response: str, reference: str, *, use_stemmer: bool = False) -> RougeScores:
    """ROUGE-1, ROUGE-2 and ROUGE-L F-measures (rouge-score's tokenizer; Porter stemming if asked)."""
    scores = _rouge_scorer(use_stemmer).score(reference, response)
    return RougeScores(
        rouge1=scores["rouge1"].fmeasure, rouge2=scores["rouge2"].fmeasure, rougeL=scores["rougeL"].fmeasure
    )


WORDNET_HINT = (
    "METEOR needs WordNet for nltk: run scripts/install_wordnet.sh (Debian's wordnet packages, offline) "
    "or, with internet, python -m nltk.downloader wordnet"
)


@lru_cache(maxsize=1)
def ensure_wordnet() -> None:
    """Checks once that nltk can read WordNet.

    Raises:
        PersonagraphError: when the WordNet data is not installed where nltk looks.
    """
    from nltk.corpus import wordnet  # only for METEOR

    try:
        wordnet.ensure_loaded()
    except LookupError:
        raise PersonagraphError(WORDNET_HINT) from None


def meteor(response: str, reference: str) -> float:
    """nltk's METEOR of a response against one reference, on whitespace tokens."""
    from nltk.translate.meteor_score import meteor_score  # only for METEOR

    ensure_wordnet()
    return float(meteor_score([tokens(reference)], tokens(response)))


class BertScoreResult(BaseModel):
    """BERTScore of one response: precision, recall and F1 (no baseline rescaling)."""

    p: float
    r: float
    f1: float


class BertScore:
    """A loaded BERTScore model.

    Args:
        model: model id or local folder; None or ``all-MiniLM-L6-v2`` for the packaged MiniLM. Ids must be
            in the local Hugging Face cache (weights are never downloaded).
        num_layers: which layer's embeddings to use; required for a model bert-score has no default for,
            6 for the packaged MiniLM.
        batch_size: pairs per forward pass.
        idf: weight tokens by inverse document frequency over the references.
    """

    def __init__(
        self, model: str | None = None, *, num_layers: int | None = None, batch_size: int = 32, idf: bool = False
    ) -> None:
        path, label = resolve_model(model)
        if num_layers is None and label.startswith(PACKAGED_MINILM):
            num_layers = PACKAGED_BERTSCORE_LAYERS
        self.model = label
        self.num_layers = num_layers
        self.idf = idf
        self._path = path
        self._batch_size = batch_size
        self._scorer: BERTScorer | None = None

    @property
    def label(self) -> str:
        """What produced the numbers, e.g. ``bertscore: all-MiniLM-L6-v2 (packaged), layer 6, no idf``."""
        layer = f"layer {self.num_layers}" if self.num_layers else "bert-score's default layer"
        return f"bertscore: {self.model}, {layer}, {'idf' if self.idf else 'no idf'}, not rescaled"

    def _load(self) -> BERTScorer:
        if self._scorer is None:
            from bert_score import BERTScorer  # heavy (torch): only for BERTScore
            from bert_score.utils import model2layers

            if self.num_layers is None and self._path not in model2layers:
                raise PersonagraphError(
                    f"BERTScore model {self.model}: say which layer to use (--bertscore-layers N)"
                )
            quiet_transformers()
            try:
                self._scorer = BERTScorer(
                    model_type=self._path, num_layers=self.num_layers, batch_size=self._batch_size,
                    idf=self.idf, device="cpu",
                )
            except AssertionError as exc:  # bert-score checks the layer against the model's with an assert
                raise PersonagraphError(f"--bertscore-layers {self.num_layers}: {exc}") from None
            except (OSError, ValueError) as exc:
                raise PersonagraphError(
                    f"BERTScore model {self.model}: cannot load it ({type(exc).__name__}: {exc})"
                ) from None
        return self._scorer

    def score(self, responses: Sequence[str], references: Sequence[str]) -> list[BertScoreResult]:
        """BERTScore P/R/F1 of each response against its reference.

        Args:
            responses: candidate texts; each must be non-empty (empty ones are failures, scored by the caller).
            references: one reference per response.
        """
        if len(responses) != len(references):
            raise ValueError(f"{len(responses)} responses but {len(references)} references")
        if not responses:
            return []
        if any(not text.strip() for text in [*responses, *references]):
            raise ValueError("BERTScore of an empty text: score failures before calling this")
        scorer = self._load()
        if self.idf:
            scorer.compute_idf(list(references))
        p, r, f1 = scorer.score(list(responses), list(references), batch_size=self._batch_size)
        return [BertScoreResult(p=float(a), r=float(b), f1=float(c)) for a, b, c in zip(p, r, f1, strict=True)]


@lru_cache(maxsize=4)
def load_bertscore(model: str | None = None, num_layers: int | None = None) -> BertScore:
    """A BERTScore model shared by the calls of one process (loaded on first use)."""
    return BertScore(model, num_layers=num_layers)
