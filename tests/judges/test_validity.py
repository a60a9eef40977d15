"""Judge-check variants and statistics: deterministic builds, and the figures against scipy/sklearn."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import roc_auc_score

from personagraph.judges.refusal import detect_refusal
from personagraph.judges.stats import pair_credit, roc_auc
from personagraph.judges.validity import (
    CONTRADICTION_CRITERION,
    CheckItem,
    Thresholds,
    VariantStats,
    build_variant,
    content_words,
    contrast_personas,
    disclosure_variant,
    judge_verdict,
    padding_variant,
    swap_variant,
    variant_stats,
)
from personagraph.models import ModelClient
from personagraph.models.testing import register_script

COWBOY = "A 70-year-old retired cowboy from Texas who tells long stories about cattle drives"
ITEM = CheckItem(id="a1", persona=COWBOY, question="What do you do on Sundays?",
                 response="Well partner, I saddle up old Blue and ride the fence line before church.",
                 criterion="expected_action", task="Expected Action")


def test_contrast_personas_are_many_and_varied() -> None:
    personas = contrast_personas()
    assert len(personas) >= 12
    # no stock phrase: no content word is shared by more than three of them
    counts: dict[str, int] = {}
    for persona in personas:
        for word in content_words(persona):
            counts[word] = counts.get(word, 0) + 1
    assert max(counts.values()) <= 3


def test_swap_takes_a_packaged_persona_sharing_no_content_word() -> None:
    variant = swap_variant(ITEM, [], seed=0)
    assert variant.persona in contrast_personas()
    assert not content_words(variant.persona) & content_words(COWBOY)
    assert variant.response == ITEM.response and variant.criterion == ITEM.criterion
    assert variant == swap_variant(ITEM, [], seed=0)  # deterministic
    assert len({swap_variant(ITEM, [], seed=s).persona for s in range(12)}) > 1  # and seeded


def test_swap_prefers_the_inputs_personas_without_shared_words() -> None:
    overlapping = "A retired schoolteacher from Texas"  # shares "retired", "texas"
    disjoint = "A young nurse in Oslo who knits"
    variant = swap_variant(ITEM, [COWBOY, overlapping, disjoint], seed=3)
    assert variant.persona == disjoint and variant.detail == "persona from the input"
    assert swap_variant(ITEM, [COWBOY, overlapping], seed=3).persona in contrast_personas()


@pytest.mark.parametrize("seed", range(6))
def test_disclosure_is_a_persona_break_before_the_answer(seed: int) -> None:
    variant = disclosure_variant(ITEM, seed)
    assert variant.response.endswith(ITEM.response)
    assert detect_refusal(variant.response) is not None
    assert detect_refusal(variant.detail) is not None  # the sentence alone is the break


def test_padding_appends_neutral_filler_as_long_as_the_answer() -> None:
    variant = padding_variant(ITEM, seed=0)
    assert variant.response.startswith(ITEM.response)
    filler = variant.response[len(ITEM.response):].split()
    n = len(ITEM.response.split())
    assert n <= len(filler) < n + 15  # whole sentences, at most one past the answer's length
    assert not content_words(" ".join(filler)) & content_words(COWBOY)
    assert detect_refusal(variant.response) is None
    assert variant == padding_variant(ITEM, seed=0) and variant != padding_variant(ITEM, seed=1)


def _generator(messages: list[dict[str, Any]], schema: dict[str, Any] | None) -> str:
    text = messages[-1]["content"]
    if schema is not None:
        assert "Character description" in text
        return json.dumps({"attribute": "age", "persona_says": "70", "answer_says": "25",
                           "answer": "I'm 25 and I have never seen a horse."})
    return "People spend Sundays in many ways." if "Rewrite the answer" in text else ""


def _client(name: str) -> ModelClient:
    return ModelClient.create(f"test:{name}", "variant_gen", temperature=0.0, max_tokens=100)


def test_generated_variants_use_the_generator_and_keep_their_details() -> None:
    register_script("validity-gen", _generator)
    client = _client("validity-gen")
    generic = asyncio.run(build_variant("generic", ITEM, others=[], generator=client, seed=0))
    assert generic.status == "ok" and generic.response == "People spend Sundays in many ways."
    assert generic.criterion == ITEM.criterion and generic.persona == COWBOY
    contradiction = asyncio.run(build_variant("contradiction", ITEM, others=[], generator=client, seed=0))
    assert contradiction.status == "ok" and contradiction.criterion == CONTRADICTION_CRITERION
    assert contradiction.response.startswith("I'm 25") and contradiction.detail == "age: 70 → 25"


def test_a_contradiction_written_by_hand_is_the_variant_and_no_generator_is_asked() -> None:
    written = ITEM.model_copy(update={"contradiction": "Well partner, I've never sat on a horse in my life."})
    down = _client("down")
    variant = asyncio.run(build_variant("contradiction", written, others=[], generator=down, seed=0))
    assert variant.status == "ok" and variant.response == written.contradiction  # "down" would have failed
    assert variant.criterion == CONTRADICTION_CRITERION and variant.detail == "written by hand (items file)"
    edited = written.model_copy(update={"contradiction": "I was born in Boston and I hate horses."})
    again = asyncio.run(build_variant("contradiction", edited, others=[], generator=down, seed=0))
    assert again.id != variant.id  # a new text is a new variant, judged afresh


def test_generated_variant_that_changes_nothing_or_fails_is_a_failed_value() -> None:
    register_script("validity-echo", lambda messages, schema: "  " + ITEM.response + "\n")
    echo = _client("validity-echo")
    echoed = asyncio.run(build_variant("generic", ITEM, others=[], generator=echo, seed=0))
    assert echoed.status == "failed" and "unchanged" in (echoed.error or "")
    down = asyncio.run(build_variant("contradiction", ITEM, others=[], generator=_client("down"), seed=0))
    assert down.status == "failed" and down.error and down.response == ""
    broken = asyncio.run(build_variant("contradiction", ITEM, others=[], generator=_client("broken"), seed=0))
    assert broken.status == "failed"


# --- statistics -----------------------------------------------------------------------------------
@pytest.fixture
def scores() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    original = rng.integers(1, 6, size=40).astype(float)
    variant = np.clip(original - rng.integers(-1, 3, size=40), 1, 5).astype(float)
    return original, variant


def test_roc_auc_matches_sklearn_with_ties(scores: tuple[np.ndarray, np.ndarray]) -> None:
    original, variant = scores
    labels = np.r_[np.ones(original.size), np.zeros(variant.size)]
    expected = roc_auc_score(labels, np.r_[original, variant])
    assert roc_auc(original, variant) == pytest.approx(expected, abs=1e-12)
    assert roc_auc([5, 5], [1, 1]) == 1.0 and roc_auc([3], [3]) == 0.5
    assert roc_auc([], [1]) is None


def test_pairwise_accuracy_counts_ties_half(scores: tuple[np.ndarray, np.ndarray]) -> None:
    original, variant = scores
    credit = [1.0 if a > b else 0.5 if a == b else 0.0 for a, b in zip(original, variant, strict=True)]
    expected = np.mean(credit)
    result = variant_stats("swap", original, variant, seed=0, n_resamples=2000)
    assert result.pairwise_accuracy.value == pytest.approx(expected)
    assert list(pair_credit(np.array([3, 2, 1]), np.array([2, 2, 2]))) == [1.0, 0.5, 0.0]


def test_mean_change_ci_matches_scipy_bootstrap(scores: tuple[np.ndarray, np.ndarray]) -> None:
    original, variant = scores
    result = variant_stats("generic", original, variant, seed=3, n_resamples=2000)
    expected = stats.bootstrap((variant - original,), np.mean, n_resamples=2000, method="BCa",
                               random_state=np.random.default_rng(3)).confidence_interval
    assert result.mean_change.value == pytest.approx(np.mean(variant - original))
    assert result.mean_change.ci_low == pytest.approx(expected.low, abs=1e-9)
    assert result.mean_change.ci_high == pytest.approx(expected.high, abs=1e-9)
    assert result.n == 40 and result.original_mean == pytest.approx(original.mean())


def test_disclosure_caught_uses_each_pairs_cap() -> None:
    result = variant_stats("disclosure", [5, 5, 4, 4], [1, 2, 2, 3], caps=[1, 2, 1, None])
    # caps 1, 2, 1 apply (the last rubric has none): 1 <= 1, 2 <= 2, 2 > 1
    assert result.n_caught == 2 and result.caught == pytest.approx(2 / 3)
    assert variant_stats("swap", [5], [1], caps=[1]).caught is None
    with pytest.raises(ValueError):
        variant_stats("swap", [1, 2], [1])


def test_empty_pairs_give_undefined_figures() -> None:
    result = variant_stats("padding", [], [])
    assert result.n == 0 and result.auc is None and result.mean_change.value is None


def _stats(kind: str, original: list[float], variant: list[float], **kw: Any) -> VariantStats:
    return variant_stats(kind, original, variant, n_resamples=200, **kw)  # type: ignore[arg-type]


def test_verdict_warns_on_swap_auc_and_missed_disclosures() -> None:
    good = {
        "swap": _stats("swap", [5, 4, 5], [1, 2, 1]),
        "disclosure": _stats("disclosure", [5, 4, 5], [1, 1, 1], caps=[1, 1, 1]),
        "generic": _stats("generic", [5, 4, 5], [2, 2, 2]),
        "contradiction": _stats("contradiction", [5, 4, 5], [1, 1, 2]),
        "padding": _stats("padding", [5, 4, 5], [5, 4, 5]),
    }
    verdict = judge_verdict("j", good, Thresholds())
    assert verdict.verdict == "pass" and verdict.reasons == [] and verdict.notes == []
    assert verdict.line() == "j: PASS"
    bad = good | {"swap": _stats("swap", [3, 4, 3], [3, 4, 4]),
                  "disclosure": _stats("disclosure", [5, 4, 5], [4, 1, 3], caps=[1, 1, 1]),
                  "padding": _stats("padding", [3, 3, 3, 3], [4, 5, 4, 5])}
    flagged = judge_verdict("j", bad, Thresholds())
    assert flagged.verdict == "warn"
    assert any("swap AUC 0.33" in r for r in flagged.reasons)
    assert any("caught 33% of AI disclosures" in r for r in flagged.reasons)
    assert any("padding raised" in n for n in flagged.notes)
    worse = bad | {"generic": _stats("generic", [2], [4])}
    assert judge_verdict("j", worse, Thresholds()).notes[0] == "generic AUC 0.00"
    lenient = Thresholds(min_auc=0.3, min_caught=0.3)
    assert judge_verdict("j", bad, lenient).verdict == "pass"
