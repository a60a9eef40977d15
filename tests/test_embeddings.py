"""personagraph.embeddings: the shared encoder is safe to call from several threads at once."""

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from personagraph import embeddings


def test_threads_share_the_encoder(monkeypatch) -> None:
    monkeypatch.setattr(embeddings, "_cache", {})  # every call reaches the tokenizer
    batches = [[f"thread {t} sentence {i} about cowboys and the sea" for i in range(16)] for t in range(4)]
    with ThreadPoolExecutor(4) as pool:
        together = list(pool.map(embeddings.encode, batches))
    monkeypatch.setattr(embeddings, "_cache", {})
    alone = [embeddings.encode(batch) for batch in batches]
    for a, b in zip(together, alone, strict=True):
        assert a.shape == (16, 384)
        np.testing.assert_allclose(a, b, atol=1e-5)
