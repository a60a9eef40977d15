"""bench/nli_contradiction.py: SNLI pairs are read with their gold labels, the unfitted cross-encoder is the
packaged MiniLM itself (LoRA factors start at zero), a reply is read pair by pair, fact × sentence, and a
packaged model with other outputs is read and scored by the names given to them."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bench.contradiction_signals import Record
from bench.nli_contradiction import LABELS, accuracy, cross_encoder, packaged, readings, snli
from personagraph.judges.features import Text


def test_snli_pairs_keep_their_gold_label_and_drop_the_unlabelled(tmp_path) -> None:
    rows = [{"sentence1": "A man rides.", "sentence2": "A man sleeps.", "gold_label": "contradiction"},
            {"sentence1": "A dog runs.", "sentence2": "An animal runs.", "gold_label": "entailment"},
            {"sentence1": "Kids play.", "sentence2": "Kids play chess.", "gold_label": "-"}]
    path = tmp_path / "snli.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert snli(path) == [("A man rides.", "A man sleeps.", LABELS["contradiction"]),
                          ("A dog runs.", "An animal runs.", LABELS["entailment"])]


def test_a_reply_is_read_at_its_most_contradicted_and_most_entailed_pair() -> None:
    text = Text(persona="I keep three horses. I live in Dallas.", question="User1: where?",
                response="I live in Boston. I keep horses.")
    seen: list[tuple[str, str]] = []

    def probabilities(premises: list[str], hypotheses: list[str]) -> np.ndarray:
        seen.extend(zip(premises, hypotheses, strict=True))
        out = np.tile([0.1, 0.8, 0.1], (len(premises), 1))
        for k, pair in enumerate(zip(premises, hypotheses, strict=True)):
            if pair == ("I live in Dallas.", "I live in Boston."):
                out[k] = [0.05, 0.05, 0.9]
            if pair == ("I keep three horses.", "I keep horses."):
                out[k] = [0.7, 0.2, 0.1]
        return out

    assert readings(probabilities, LABELS, Record("usr", "a", text)) == pytest.approx((-0.9, 0.7))
    assert len(seen) == 4  # two facts × two sentences


def test_a_model_without_an_entailment_output_is_read_and_scored_on_contradiction_alone() -> None:
    labels = {"other": 0, "contradiction": 1}
    text = Text(persona="I live in Dallas.", question="User1: where?", response="I live in Boston.")

    def probabilities(premises: list[str], hypotheses: list[str]) -> np.ndarray:
        said = np.array(["Boston" in h or "sleeps" in h for h in hypotheses], dtype=float)
        return np.column_stack([1 - said, said])

    contradiction, entailment = readings(probabilities, labels, Record("usr", "a", text))
    assert contradiction == -1.0 and np.isnan(entailment)
    test = [("A man rides.", "A man sleeps.", LABELS["contradiction"]),
            ("A dog runs.", "An animal runs.", LABELS["entailment"]),
            ("Kids play.", "Kids play chess.", LABELS["neutral"]),
            ("A cat naps.", "A cat runs.", LABELS["contradiction"])]
    assert accuracy(probabilities, labels, test) == 0.75  # the last contradiction is missed


def test_a_packaged_model_folder_without_its_files_is_refused_in_one_line(tmp_path) -> None:
    (tmp_path / "model.onnx").write_bytes(b"")
    with pytest.raises(SystemExit, match=r"expected one tokenizer.json, found 0"):
        packaged(tmp_path)


def test_the_unfitted_cross_encoder_is_the_packaged_minilm() -> None:
    torch = pytest.importorskip("torch")
    from transformers import AutoModel

    from personagraph.embeddings import packaged_minilm_path

    encoder, head, _ = cross_encoder()
    trainable = {n for n, p in encoder.named_parameters() if p.requires_grad}
    assert trainable and all(n.endswith((".a", ".b")) or "LayerNorm" in n for n in trainable)
    assert not any("word_embeddings" in n for n in trainable)
    plain = AutoModel.from_pretrained(packaged_minilm_path())
    ids = torch.tensor([[101, 1045, 2293, 5194, 102]])
    with torch.no_grad():
        fitted, base = encoder(input_ids=ids), plain(input_ids=ids)
    assert torch.allclose(fitted.last_hidden_state, base.last_hidden_state)
    assert head.out_features == 3
