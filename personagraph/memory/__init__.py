"""Long-term memory for persona agents: a Chroma bank, offline embeddings, recall and retrieval metrics.

- :mod:`~personagraph.memory.bank` — ``Memory``, ``MemoryBank`` (local folder or Chroma server, one collection
  per user), JSONL and MADial import/export;
- :mod:`~personagraph.memory.embeddings` — a Chroma embedding function over the offline encoder of
  :mod:`personagraph.embeddings`;
- :mod:`~personagraph.memory.recall` — ``Recaller``: dense views, BM25, RRF hybrid, proactive emotion/scene
  cues, multiview fusion, optional LLM reranking;
- :mod:`~personagraph.memory.retriever` — ``MemoryRetriever`` (``MemoryBank.as_retriever``): one user's
  memories as a LangChain retriever, recalled by any of those methods;
- :mod:`~personagraph.memory.metrics` — MAP/MRR/nDCG (standard and MADial)/Recall/Precision at k;
- :mod:`~personagraph.memory.madial` — MADial-Bench loaders and the settings' candidates;
- :mod:`~personagraph.memory.evaluation`, :mod:`~personagraph.memory.dialogue_eval` — the two evaluations.
"""

from personagraph.memory.bank import Hit, Memory, MemoryBank, read_memories
from personagraph.memory.context import DialogueContext, Turn, context_from_lines, context_from_messages
from personagraph.memory.metrics import RetrievalScores, evaluate_rankings
from personagraph.memory.recall import METHODS, Recalled, Recaller, RecallSettings
from personagraph.memory.retriever import MemoryRetriever

__all__ = [
    "METHODS",
    "DialogueContext",
    "Hit",
    "Memory",
    "MemoryBank",
    "MemoryRetriever",
    "RecallSettings",
    "Recalled",
    "Recaller",
    "RetrievalScores",
    "Turn",
    "context_from_lines",
    "context_from_messages",
    "evaluate_rankings",
    "read_memories",
]
