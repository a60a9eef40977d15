"""personagraph.bert: the plain-torch MiniLM gives sentence-transformers' own vectors, and only for the
folders it reproduces."""

import json
from pathlib import Path

import numpy as np
import pytest

from personagraph import bert, embeddings
from personagraph.errors import PersonagraphError

TEXTS = [
    "i ride horses every morning .",
    "A 70-year-old retired cowboy from Texas",
    " ",
    "Short.",
    "User1: hello . what do you like to do ?\nUser2: well hiking in spring time is my favorite",
    " ".join(f"word{i}" for i in range(400)),  # past max_seq_length: truncated as sentence-transformers does
    "Émile's café — naïve façade, 東京 and emoji 🤠",
]


@pytest.fixture(scope="module")
def sentence_transformer():
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(embeddings.packaged_minilm_path(), device="cpu", local_files_only=True)


def test_the_vectors_are_sentence_transformers_own(sentence_transformer) -> None:
    encoder = bert.BertEncoder(embeddings.packaged_minilm_path())
    ours = encoder.encode(TEXTS, batch_size=3)  # batches mixing lengths: padding must not change a vector
    theirs = sentence_transformer.encode(TEXTS, normalize_embeddings=True, convert_to_numpy=True)
    assert ours.shape == (len(TEXTS), 384) and ours.dtype == np.float32
    np.testing.assert_allclose(ours, theirs, atol=1e-5)
    np.testing.assert_allclose(encoder.encode(TEXTS[:1]), ours[:1], atol=1e-6)  # alone as in a batch


def test_the_packaged_minilm_is_encoded_by_it() -> None:
    assert bert.supports(embeddings.packaged_minilm_path())
    assert isinstance(embeddings.load_encoder(), bert.BertEncoder)
    assert embeddings.embedding_dim() == 384


def _folder_like_minilm(tmp_path: Path, pooling: dict[str, bool]) -> Path:
    source = Path(embeddings.packaged_minilm_path())
    for item in source.iterdir():
        if item.name != "1_Pooling":
            (tmp_path / item.name).symlink_to(item)
    (tmp_path / "1_Pooling").mkdir()
    config = json.loads((source / "1_Pooling" / "config.json").read_text())
    (tmp_path / "1_Pooling" / "config.json").write_text(json.dumps({**config, **pooling}))
    return tmp_path


def test_another_pooling_is_left_to_sentence_transformers(tmp_path: Path) -> None:
    cls_pooling = {"pooling_mode_mean_tokens": False, "pooling_mode_cls_token": True}
    folder = _folder_like_minilm(tmp_path, cls_pooling)
    assert not bert.supports(folder)
    from sentence_transformers import SentenceTransformer

    assert isinstance(embeddings.load_encoder(str(folder)), SentenceTransformer)
    cls_vectors = embeddings.encode(TEXTS[:2], model_path=str(folder))
    mean_vectors = embeddings.encode(TEXTS[:2])
    assert cls_vectors.shape == mean_vectors.shape
    assert not np.allclose(cls_vectors, mean_vectors, atol=1e-3)  # the CLS pooling was applied, not ours


def test_a_folder_it_cannot_read_is_not_supported(tmp_path: Path) -> None:
    assert not bert.supports(tmp_path)  # no modules.json
    (tmp_path / "modules.json").write_text("not json")
    assert not bert.supports(tmp_path)


def test_a_malformed_settings_file_is_one_line_naming_it(tmp_path: Path) -> None:
    folder = _folder_like_minilm(tmp_path, {})
    (folder / "sentence_bert_config.json").unlink()
    (folder / "sentence_bert_config.json").write_text("{max_seq_length: 256")
    assert bert.supports(folder)
    with pytest.raises(PersonagraphError) as error:
        bert.BertEncoder(folder)
    message = str(error.value)
    assert "sentence_bert_config.json" in message and "invalid JSON" in message and "\n" not in message
