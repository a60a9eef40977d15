"""Fixtures for the metric tests: tiny NLI classifiers built and saved locally (no download)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "i", "like", "dogs", "cats", "hate", "have", "a", "dog", "."]


def build_tiny_nli(folder: Path, id2label: dict[int, str], winner: int) -> Path:
    """Saves a 1-layer BERT sequence classifier whose prediction is always label ``winner``.

    The classifier weights are zero and its bias favours ``winner``, so the outcome is known while the
    whole real path runs: tokenizer from a vocab file, pair encoding, forward pass, config.id2label.
    """
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

    folder.mkdir(parents=True, exist_ok=True)
    vocab_file = folder / "vocab.txt"
    vocab_file.write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    tokenizer = BertTokenizer(vocab=str(vocab_file))
    config = BertConfig(
        vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=64, num_labels=len(id2label),
        id2label=id2label, label2id={name: index for index, name in id2label.items()},
    )
    torch.manual_seed(0)
    model = BertForSequenceClassification(config)
    with torch.no_grad():
        model.classifier.weight.zero_()
        bias = torch.zeros(len(id2label))
        bias[winner] = 5.0
        model.classifier.bias.copy_(bias)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_nli(tmp_path_factory: pytest.TempPathFactory) -> Callable[[dict[int, str], int], str]:
    """A factory of tiny NLI model folders: ``tiny_nli(id2label, winner) -> path``."""
    made: dict[tuple, str] = {}

    def make(id2label: dict[int, str], winner: int) -> str:
        key = (tuple(sorted(id2label.items())), winner)
        if key not in made:
            folder = tmp_path_factory.mktemp("nli")
            made[key] = str(build_tiny_nli(folder, id2label, winner))
        return made[key]

    return make


