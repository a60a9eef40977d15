"""personagraph.embeddings: the shared encoder is safe to call from several threads at once; a fixed corpus's
vectors are kept on disk."""

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


def test_a_small_batch_is_encoded_on_one_thread_and_the_threads_are_restored(monkeypatch) -> None:
    from threadpoolctl import threadpool_info, threadpool_limits

    def blas_threads() -> int:
        return max(pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas")

    seen: list[int] = []
    encoder = embeddings.load_encoder()
    real = encoder.encode

    def spy(texts, **kwargs):
        seen.append(blas_threads())
        return real(texts, **kwargs)

    monkeypatch.setattr(encoder, "encode", spy)
    with threadpool_limits(2, user_api="blas"):
        embeddings.clear_cache()
        embeddings.encode(["a few words", "a verdict's texts"])
        embeddings.encode([f"bulk sentence number {i}" for i in range(embeddings.ONE_THREAD_BELOW)])
        assert seen == [1, 2]  # a verdict's few texts on one thread, a bulk encode on every BLAS thread
        assert blas_threads() == 2
    embeddings.encode(["a few words"])  # cached: clear_cache forgot it, encode remembered it again
    assert len(seen) == 2


def test_the_packaged_encoder_needs_no_torch() -> None:
    import subprocess
    import sys

    code = ("import sys; from personagraph import embeddings; embeddings.encode(['a cowboy']); "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"  # ~180 MB and ~1 s of start-up that an eval does not pay


def test_a_corpus_is_encoded_once_and_read_back_from_disk(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("PERSONAGRAPH_CACHE_DIR", str(tmp_path))
    corpus = ["Cattle Ranch Roundup: hands on horseback", "Hospital Emergency Room: a night shift"]
    first = embeddings.encode_stored(corpus)
    np.testing.assert_allclose(first, embeddings.encode(corpus), atol=1e-6)
    assert len(list((tmp_path / "vectors").glob("*.npy"))) == 1

    def refuse(*args: object, **kwargs: object) -> np.ndarray:
        raise AssertionError("encoded again")

    monkeypatch.setattr(embeddings, "encode", refuse)
    np.testing.assert_array_equal(embeddings.encode_stored(corpus), first)  # read back, not encoded


def test_a_stored_corpus_that_cannot_be_read_is_encoded_again(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("PERSONAGRAPH_CACHE_DIR", str(tmp_path))
    corpus = ["Barn Dance: fiddles and hay bales"]
    first = embeddings.encode_stored(corpus)
    (stored,) = (tmp_path / "vectors").glob("*.npy")
    stored.write_bytes(b"not an array")
    np.testing.assert_allclose(embeddings.encode_stored(corpus), first, atol=1e-6)
    np.testing.assert_allclose(np.load(stored), first, atol=1e-6)  # and written again


def test_other_texts_are_another_entry(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("PERSONAGRAPH_CACHE_DIR", str(tmp_path))
    a = embeddings.encode_stored(["County Fair Rodeo: bull riding"])
    b = embeddings.encode_stored(["Startup Office: standing desks"])
    assert len(list((tmp_path / "vectors").glob("*.npy"))) == 2
    assert not np.allclose(a, b)
