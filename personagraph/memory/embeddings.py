"""The memory bank's Chroma embedding function over the offline encoder in :mod:`personagraph.embeddings`.

Chroma's default embedding function downloads a model at run time, which fails offline; this one wraps
the packaged MiniLM (or any local sentence-transformers folder) instead.
"""

from __future__ import annotations

from typing import Any

from chromadb.api.types import Documents, EmbeddingFunction, Embeddings
from chromadb.utils.embedding_functions import register_embedding_function

from personagraph.embeddings import encode


@register_embedding_function
class LocalSentenceEmbedding(EmbeddingFunction[Documents]):
    """Chroma embedding function over a local sentence-transformers model (normalized vectors).

    Args:
        model_path: a local model folder; ``None`` means the packaged all-MiniLM-L6-v2.
    """

    def __init__(self, model_path: str | None = None) -> None:
        self.model_path = model_path

    def __call__(self, input: Documents) -> Embeddings:
        return list(encode(list(input), model_path=self.model_path))

    @staticmethod
    def name() -> str:
        return "personagraph-local-sentence"

    def default_space(self) -> str:  # type: ignore[override]
        return "cosine"

    def get_config(self) -> dict[str, Any]:
        return {"model_path": self.model_path}

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> LocalSentenceEmbedding:
        return LocalSentenceEmbedding(config.get("model_path"))
