"""Reference-based metrics, PersoBench prompting, behavior alignment and profile retrieval.

One module per family:

* :mod:`.fluency` — ROUGE-1/2/L, METEOR, BERTScore (model named in every result);
* :mod:`.diversity` — Dist-1/2 per response and corpus-level;
* :mod:`.personalization` — C-Score and UE-Score (over :mod:`.nli`), persona coverage (over :mod:`personagraph.embeddings`);
* :mod:`.instructability` — failure ratio and response time;
* :mod:`.scoring` — any set of responses → per-item numbers, means and failure ratio (``personagraph score``);
* :mod:`.persobench` — PersoBench generation (vanilla / chain of thought) and scoring;
* :mod:`.behavior` — INSPIRED strategies, LLM labeller, classifier, behavior alignment, Cohen's κ;
* :mod:`.longlamp` — LongLaMP profile retrieval (BM25, dense, recency, random), generation and scoring.
"""

from personagraph.embeddings import PACKAGED_MINILM, embed
from personagraph.metrics.behavior import (
    BehaviorConfig,
    LLMLabeller,
    StrategyClassifier,
    ba,
    behavior_alignment,
    cohen_kappa,
    load_inspired,
    load_strategies,
    strategy_names,
)
from personagraph.metrics.diversity import Diversity, corpus_distinct_n, distinct_n, diversity
from personagraph.metrics.fluency import BertScore, RougeScores, load_bertscore, meteor, rouge
from personagraph.metrics.instructability import CostReport, cost_report, failure_ratio, is_failure
from personagraph.metrics.longlamp import (
    LongLaMPConfig,
    load_longlamp,
    retrieve,
)
from personagraph.metrics.nli import Entailment, NLIModel, load_nli
from personagraph.metrics.persobench import (
    PersoBenchConfig,
    load_persobench,
    persobench_messages,
)
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
    "BehaviorConfig",
    "BertScore",
    "CostReport",
    "Diversity",
    "Entailment",
    "LLMLabeller",
    "LongLaMPConfig",
    "NLIModel",
    "PersoBenchConfig",
    "RougeScores",
    "ScoreConfig",
    "ScoreItem",
    "ScoreReport",
    "StrategyClassifier",
    "ascore_items",
    "ba",
    "behavior_alignment",
    "c_scores",
    "cohen_kappa",
    "corpus_distinct_n",
    "cost_report",
    "distinct_n",
    "diversity",
    "embed",
    "failure_ratio",
    "is_failure",
    "load_bertscore",
    "load_inspired",
    "load_longlamp",
    "load_nli",
    "load_persobench",
    "load_strategies",
    "meteor",
    "parse_metrics",
    "persobench_messages",
    "persona_coverage",
    "persona_sentences",
    "retrieve",
    "rouge",
    "score_items",
    "strategy_names",
    "ue_score",
    "ue_scores",
]
