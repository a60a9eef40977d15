"""personagraph.likelihood: log-probabilities of a given continuation under the embedded 0.5B (torch)."""

from __future__ import annotations

import numpy as np
import pytest

from personagraph import likelihood
from personagraph.errors import PersonagraphError


def test_an_unknown_model_is_one_line_naming_the_known_ones() -> None:
    with pytest.raises(PersonagraphError, match=r"no embedded model 'qwen-9b' \(known: qwen2.5-coder-1.5b"):
        likelihood.model_folder("qwen-9b")


@pytest.mark.embedded
def test_the_scores_are_transformers_log_softmax_at_each_continuation_token() -> None:
    """The plain-torch forward pass gives transformers' own model's log-probabilities, on its tokens."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    pairs = [("User1: what do you do for a living ?\nUser2:", " mechanical engineer for chevy"),
             ("Persona of Answer: Émile, a café owner in 東京 🤠\n\nQuestion: Coffee?\nAnswer:",
              " Oui, naïvely.")]
    scored = likelihood.continuation_logprobs(pairs)
    folder = likelihood.model_folder()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    lm = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    for (prefix, continuation), mine in zip(pairs, scored, strict=True):
        head = tokenizer(prefix, add_special_tokens=False).input_ids
        tail = tokenizer(continuation, add_special_tokens=False).input_ids
        with torch.inference_mode():
            logits = lm(torch.tensor([head + tail])).logits[0].float()
        reference = [float(torch.log_softmax(logits[len(head) - 1 + i], -1)[token])
                     for i, token in enumerate(tail)]
        assert len(mine) == len(tail)
        np.testing.assert_allclose(mine, reference, atol=2e-4)


@pytest.mark.embedded
def test_a_likely_continuation_outscores_an_unlikely_one_and_edges_hold() -> None:
    paris, banana, empty, long = likelihood.continuation_logprobs([
        ("The capital of France is", " Paris."),
        ("The capital of France is", " banana."),
        ("The capital of France is", ""),
        ("word " * 3000, " Paris."),  # a prefix past MAX_TOKENS is cut from its start, not an error
    ])
    assert paris.sum() > banana.sum() + 5
    assert empty.size == 0
    assert long.size == paris.size and np.all(np.isfinite(long)) and np.all(long <= 0)


def test_a_judge_reading_likelihoods_without_the_weights_is_refused_in_one_line(monkeypatch) -> None:
    """The evidence protocol's fitted model reads persona_pmi: without the 0.5B's packages, choosing the
    protocol fails before anything is judged, naming the extra and the alternative protocol."""
    from personagraph.judges.judge import ready_protocol

    monkeypatch.setattr(likelihood, "is_installed", lambda model: False)
    with pytest.raises(PersonagraphError, match=r"qwen2.5-coder-0.5b, which is not installed: pip "
                       r"install 'personagraph\[local\]', or judge with --judge-protocol"):
        ready_protocol(None, "openai:gpt-4o-mini")
    assert ready_protocol("rationale", "openai:gpt-4o-mini").name == "rationale"


@pytest.mark.embedded
def test_a_pair_scored_before_is_served_from_the_cache(monkeypatch) -> None:
    pair = ("User1: any pets ?\nUser2:", " a black lab named trooper")
    [first] = likelihood.continuation_logprobs([pair])
    lm = likelihood._load(likelihood.PACKAGED_LM)

    def no_forward(ids):
        raise AssertionError("a forward pass for a pair already scored")

    monkeypatch.setattr(lm, "hidden", no_forward)
    [again] = likelihood.continuation_logprobs([pair])
    np.testing.assert_array_equal(again, first)
    with pytest.raises(AssertionError, match="forward pass"):
        likelihood.continuation_logprobs([(pair[0], " a grey cat")])


def test_a_conversion_that_cannot_write_is_one_line_and_leaves_nothing(tmp_path, monkeypatch) -> None:
    import transformers

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", full_disk)
    folder = tmp_path / "likelihood" / "qwen"
    expected = r"qwen: cannot write the converted m.gguf \(No space left on device\); free space there or set"
    with pytest.raises(PersonagraphError, match=expected + r" \$PERSONAGRAPH_CACHE_DIR"):
        likelihood._convert(tmp_path / "m.gguf", folder)
    assert not folder.exists() and not list(folder.parent.glob("*.tmp*"))
