"""Reference-based metrics, PersoBench prompting, behavior alignment and profile retrieval.

One module per family: :mod:`fluency` (ROUGE, METEOR, BERTScore), :mod:`diversity` (Dist-1/2),
:mod:`personalization` (C-Score, UE-Score, persona coverage) over :mod:`nli` and :mod:`embeddings`,
:mod:`instructability` (failure ratio, response time), :mod:`scoring` (any responses file → numbers).
"""

from personagraph.metrics.diversity import Diversity, corpus_distinct_n, distinct_n, diversity
from personagraph.metrics.embeddings import PACKAGED_MINILM, embed, load_sentence_model, packaged_minilm_path
from personagraph.metrics.fluency import (
    BertScore,
    BertScoreResult,
    RougeScores,
    load_bertscore,
    meteor,
    rouge,
)
from personagraph.metrics.instructability import CostReport, cost_report, failure_ratio, is_failure
from personagraph.metrics.nli import Entailment, NLIModel, load_nli
from personagraph.metrics.personalization import c_scores, persona_coverage, ue_score, ue_scores
from personagraph.metrics.scoring import (
    METRICS,
    ScoreConfig,
    ScoreItem,
    ScoreReport,
    ascore_items,
    parse_metrics,
    score_items,
)
from personagraph.metrics.text import persona_sentences

__all__ = [
    "METRICS",
    "PACKAGED_MINILM",
    "BertScore",
    "BertScoreResult",
    "CostReport",
    "Diversity",
    "Entailment",
    "NLIModel",
    "RougeScores",
    "ScoreConfig",
    "ScoreItem",
    "ScoreReport",
    "ascore_items",
    "c_scores",
    "corpus_distinct_n",
    "cost_report",
    "distinct_n",
    "diversity",
    "embed",
    "failure_ratio",
    "is_failure",
    "load_bertscore",
    "load_nli",
    "load_sentence_model",
    "meteor",
    "packaged_minilm_path",
    "parse_metrics",
    "persona_coverage",
    "persona_sentences",
    "rouge",
    "score_items",
    "ue_score",
    "ue_scores",
]
