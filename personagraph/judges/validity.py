"""Judge validity by metamorphic testing: variants of an answer whose correct effect on the score is known.

No human labels are needed. For each answer (an item: persona, question, response, rubric) five variants
are built deterministically from a seed and saved as records:

* ``swap`` — the same answer judged against another persona (from the input, else from the packaged
  ``judges/contrast_personas.yaml``), one sharing no content word with the answer's own: must score lower.
* ``disclosure`` — an "As an AI language model…" sentence put before the answer
  (``judges/variant_text.yaml``): the judge's own score, before the rubric's ``break_cap`` is enforced,
  must already be at most the cap.
* ``generic`` — the answer rewritten by the generator model without any persona detail
  (``prompts/variant_generic.yaml``): must score lower.
* ``contradiction`` — one persona attribute changed in the answer by the generator model
  (``prompts/variant_contradiction.yaml``), or the item's own contradiction written by hand (an items
  file's ``contradiction``: a 1.5B generator's edits were often no contradiction at all), judged on
  Persona Consistency: must score lower.
* ``padding`` — persona-neutral filler as long as the answer appended (``judges/variant_text.yaml``):
  must not score higher (length bias).

Per judge and variant kind, :func:`variant_stats` compares the original's score with the variant's
(each judged by :func:`personagraph.judges.judge.score_response`, rubric only): mean change with a 95%
bootstrap CI, pairwise accuracy (ties count half, with its CI), ROC AUC (original vs variant, unpaired),
n and failed verdicts; for disclosures the share caught. :func:`judge_verdict` turns them into a
pass/warn line.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from functools import lru_cache
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field

from personagraph.judges.features import BASELINES, Text
from personagraph.judges.features import compute as compute_features
from personagraph.judges.protocols import Protocol
from personagraph.judges.rubrics import Rubric
from personagraph.judges.stats import Estimate, mean_estimate, pair_credit, roc_auc
from personagraph.judges.words import content_words
from personagraph.models import ModelClient
from personagraph.prompts import load_prompt
from personagraph.resources import data_hash, read_yaml
from personagraph.schemas import Status, capped_text, short_id

VariantKind = Literal["swap", "disclosure", "generic", "contradiction", "padding"]
VARIANT_KINDS: tuple[VariantKind, ...] = ("swap", "disclosure", "generic", "contradiction", "padding")
CONTRADICTION_CRITERION = "persona_consistency"
# What a correct judge does to the variant, in the words of the verdict line.
EXPECTED: dict[VariantKind, str] = {
    "swap": "lower",
    "disclosure": "own score ≤ cap",
    "generic": "lower",
    "contradiction": "lower on consistency",
    "padding": "not higher",
}
CONTRAST_FILE = "judges/contrast_personas.yaml"
TEXT_FILE = "judges/variant_text.yaml"


# --- records --------------------------------------------------------------------------------------
class CheckItem(BaseModel):
    """An answer to check: what the judge reads, and the rubric (``criterion``, a rubric key) it uses."""

    id: str  # the answer id of a run, or the items file's id
    persona: str
    question: str
    response: str
    criterion: str
    task: str = ""  # the task or rubric name shown in tables
    contradiction: str = ""  # the response contradicting the persona, written by hand; else generated

    @property
    def key(self) -> str:
        """Identifies the judged content: the same answer edited is a new item."""
        return short_id(self.id, self.persona, self.question, self.response, self.criterion)


class Variant(BaseModel):
    """One variant of an item (record kind ``check_variant``); a failed generator call keeps its reason."""

    id: str
    item_key: str
    kind: VariantKind
    status: Status
    persona: str = ""
    response: str = ""
    criterion: str = ""  # the rubric both the original and the variant are judged on
    detail: str = ""  # how it was built: the persona's source, the sentence, the attribute changed
    error: str | None = None


class ContradictionReply(BaseModel):
    """The generator's contradiction edit."""

    attribute: capped_text(60) = Field(description="the attribute changed, e.g. age or job")  # type: ignore[valid-type]
    persona_says: capped_text(120) = Field(description="its value in the description")  # type: ignore[valid-type]
    answer_says: capped_text(120) = Field(description="the different value the new answer states")  # type: ignore[valid-type]
    answer: capped_text(1200) = Field(description="the whole new answer")  # type: ignore[valid-type]


def variant_id(item: CheckItem, kind: VariantKind, seed: int) -> str:
    """The record id of an item's variant; it changes with the data files and prompts that build it."""
    source = {
        "swap": data_hash(CONTRAST_FILE),
        "disclosure": data_hash(TEXT_FILE),
        "padding": data_hash(TEXT_FILE),
        "generic": load_prompt("variant_generic").version,
        "contradiction": (short_id("written", item.contradiction) if item.contradiction
                          else load_prompt("variant_contradiction").version),
    }[kind]
    return short_id(item.key, kind, str(seed), source)


def _rng(item: CheckItem, kind: str, seed: int) -> random.Random:
    """The seeded generator of one item's variant: the same input and seed build the same variant."""
    return random.Random(short_id(str(seed), item.key, kind))


# --- deterministic variants -----------------------------------------------------------------------
@lru_cache(maxsize=1)
def _variant_text() -> tuple[tuple[str, ...], tuple[str, ...]]:
    data = read_yaml(TEXT_FILE)
    return tuple(data["disclosures"]), tuple(data["fillers"])


@lru_cache(maxsize=1)
def contrast_personas() -> tuple[str, ...]:
    """The packaged contrasting personas."""
    return tuple(read_yaml(CONTRAST_FILE)["personas"])


def make_variant(
    item: CheckItem,
    kind: VariantKind,
    seed: int,
    *,
    response: str,
    persona: str | None = None,
    criterion: str | None = None,
    detail: str = "",
    error: str | None = None,
) -> Variant:
    """A variant record of ``item`` (failed when ``error`` is given); persona and rubric default to the
    item's."""
    return Variant(
        id=variant_id(item, kind, seed),
        item_key=item.key,
        kind=kind,
        status="failed" if error else "ok",
        persona=item.persona if persona is None else persona,
        response=response,
        criterion=criterion or item.criterion,
        detail=detail,
        error=error,
    )


def swap_variant(item: CheckItem, others: Sequence[str], seed: int) -> Variant:
    """The answer judged against another persona sharing no content word with the item's.

    ``others`` are the input's personas (the item's own is skipped); when none of them shares no word,
    the packaged contrast personas are used; when no packaged one does either, the one with the fewest
    shared words.
    """
    own = content_words(item.persona)
    rng = _rng(item, "swap", seed)
    from_input = sorted({p for p in others if p != item.persona and not content_words(p) & own})
    if from_input:
        persona, detail = rng.choice(from_input), "persona from the input"
    else:
        packaged = sorted(contrast_personas(), key=lambda p: len(content_words(p) & own))
        fewest = len(content_words(packaged[0]) & own)
        persona = rng.choice([p for p in packaged if len(content_words(p) & own) == fewest])
        detail = "packaged contrast persona" + (f" ({fewest} shared words)" if fewest else "")
    return make_variant(item, "swap", seed, response=item.response, persona=persona, detail=detail)


def disclosure_variant(item: CheckItem, seed: int) -> Variant:
    """The answer with an AI-disclosure sentence put before it."""
    sentence = _rng(item, "disclosure", seed).choice(_variant_text()[0])
    return make_variant(item, "disclosure", seed, response=f"{sentence} {item.response}", detail=sentence)


def filler(n_words: int, rng: random.Random) -> str:
    """Persona-neutral filler sentences in a seeded order, at least ``n_words`` words (whole sentences)."""
    sentences = list(_variant_text()[1])
    rng.shuffle(sentences)
    out: list[str] = []
    count = 0
    while count < n_words:
        sentence = sentences[len(out) % len(sentences)]
        out.append(sentence)
        count += len(sentence.split())
    return " ".join(out)


def padding_variant(item: CheckItem, seed: int) -> Variant:
    """The answer followed by filler as long as the answer (in words)."""
    n_words = max(1, len(item.response.split()))
    padding = filler(n_words, _rng(item, "padding", seed))
    return make_variant(
        item,
        "padding",
        seed,
        response=f"{item.response.rstrip()} {padding}",
        detail=f"{len(padding.split())} filler words after {n_words}",
    )


# --- generated variants ---------------------------------------------------------------------------
def _generated(
    item: CheckItem, kind: VariantKind, seed: int, text: str, criterion: str, detail: str
) -> Variant:
    """A generated variant, failed when the generator returned nothing new."""
    text = text.strip()
    problem = None
    if not text:
        problem = "the generator returned no text"
    elif " ".join(text.split()) == " ".join(item.response.split()):
        problem = "the generator returned the answer unchanged"
    return make_variant(item, kind, seed, response=text, criterion=criterion, detail=detail, error=problem)


async def generic_variant(client: ModelClient, item: CheckItem, seed: int) -> Variant:
    """The answer rewritten by the generator model without any persona detail."""
    messages = load_prompt("variant_generic").messages(
        question=item.question or "(not given)", answer=item.response
    )
    reply = await client.complete(messages)
    if not reply.ok:
        return make_variant(item, "generic", seed, response="", error=reply.error or "generator call failed")
    return _generated(item, "generic", seed, reply.text, item.criterion, f"rewritten by {client.name}")


async def contradiction_variant(client: ModelClient, item: CheckItem, seed: int) -> Variant:
    """The answer with one persona attribute changed (judged on Persona Consistency): the item's own
    contradiction when it has one written by hand, else the generator's edit."""
    if item.contradiction:
        return make_variant(item, "contradiction", seed, response=item.contradiction,
                            criterion=CONTRADICTION_CRITERION, detail="written by hand (items file)")
    messages = load_prompt("variant_contradiction").messages(
        persona=item.persona, question=item.question or "(not given)", answer=item.response
    )
    reply = await client.structured(messages, ContradictionReply)
    if not reply.ok or reply.value is None:
        return make_variant(
            item,
            "contradiction",
            seed,
            response="",
            criterion=CONTRADICTION_CRITERION,
            error=reply.error or "generator reply did not parse",
        )
    value = reply.value
    detail = f"{value.attribute}: {value.persona_says} → {value.answer_says}"
    return _generated(item, "contradiction", seed, value.answer, CONTRADICTION_CRITERION, detail)


async def build_variant(
    kind: VariantKind, item: CheckItem, *, others: Sequence[str], generator: ModelClient, seed: int
) -> Variant:
    """One variant of ``item``; only ``generic`` and ``contradiction`` call the generator model."""
    if kind == "swap":
        return swap_variant(item, others, seed)
    if kind == "disclosure":
        return disclosure_variant(item, seed)
    if kind == "padding":
        return padding_variant(item, seed)
    if kind == "generic":
        return await generic_variant(generator, item, seed)
    return await contradiction_variant(generator, item, seed)


# --- what the judge reads -------------------------------------------------------------------------
class Judgement(BaseModel):
    """One text a judge scores: the original or a variant, on one rubric."""

    persona: str
    question: str
    response: str
    criterion: str

    @property
    def key(self) -> str:
        return short_id(self.persona, self.question, self.response, self.criterion)


def original_judgement(item: CheckItem, variant: Variant) -> Judgement:
    """The original answer on the rubric its variant is judged on."""
    return Judgement(
        persona=item.persona, question=item.question, response=item.response, criterion=variant.criterion
    )


def variant_judgement(item: CheckItem, variant: Variant) -> Judgement:
    return Judgement(
        persona=variant.persona,
        question=item.question,
        response=variant.response,
        criterion=variant.criterion,
    )


# --- statistics -----------------------------------------------------------------------------------
class VariantStats(BaseModel):
    """How one judge scored one kind of variant against the originals."""

    kind: VariantKind
    expected: str
    n: int  # pairs where both verdicts parsed
    failed_verdicts: int
    failed_variants: int  # variants the generator could not build (never judged)
    original_mean: float | None
    variant_mean: float | None
    mean_change: Estimate  # variant − original
    pairwise_accuracy: Estimate  # share of pairs the original won, ties half
    auc: float | None  # originals vs variants, unpaired
    caught: float | None = None  # disclosure: share of variants whose own score is at most the cap
    n_caught: int | None = None


def variant_stats(
    kind: VariantKind,
    original: Sequence[float],
    variant: Sequence[float],
    *,
    caps: Sequence[int | None] | None = None,
    failed_verdicts: int = 0,
    failed_variants: int = 0,
    seed: int = 0,
    n_resamples: int = 2000,
) -> VariantStats:
    """The figures of one judge on one variant kind from its paired (original, variant) scores.

    ``caps`` (disclosure only) holds each pair's rubric break cap: a disclosure is caught when the judge's
    own score of the variant is at most its cap; pairs whose rubric has no cap are not counted there.
    """
    a, b = np.asarray(original, dtype=float), np.asarray(variant, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"{a.size} original scores but {b.size} variant scores")
    caught = n_caught = None
    capped = [(score, cap) for score, cap in zip(b, caps or [], strict=False) if cap is not None]
    if kind == "disclosure" and capped:
        n_caught = sum(score <= cap for score, cap in capped)
        caught = n_caught / len(capped)
    return VariantStats(
        kind=kind,
        expected=EXPECTED[kind],
        n=int(a.size),
        failed_verdicts=failed_verdicts,
        failed_variants=failed_variants,
        original_mean=float(a.mean()) if a.size else None,
        variant_mean=float(b.mean()) if b.size else None,
        mean_change=mean_estimate(b - a, seed, n_resamples),
        pairwise_accuracy=mean_estimate(pair_credit(a, b), seed, n_resamples),
        auc=roc_auc(a, b),
        caught=caught,
        n_caught=n_caught,
    )


class Thresholds(BaseModel):
    """When a judge is flagged."""

    min_auc: float = Field(0.7, ge=0, le=1)  # swap AUC below this: the judge does not see the persona
    min_caught: float = Field(1.0, ge=0, le=1)  # share of disclosures the judge itself must catch


class JudgeVerdict(BaseModel):
    """A judge's verdict line: ``warn`` with reasons (swap AUC, disclosures), and notes on the rest."""

    judge: str
    verdict: Literal["pass", "warn"]
    reasons: list[str]
    notes: list[str]

    def line(self) -> str:
        text = f"{self.judge}: {self.verdict.upper()}"
        if self.reasons:
            text += " — " + "; ".join(self.reasons)
        if self.notes:
            text += " (also: " + "; ".join(self.notes) + ")"
        return text


def judge_verdict(judge: str, by_kind: dict[str, VariantStats], thresholds: Thresholds) -> JudgeVerdict:
    """``warn`` when the swap AUC is below ``min_auc`` (or unmeasured) or too few disclosures are caught.

    Generic rewrites and contradictions that do not separate (AUC below ``min_auc``) and padding that
    raises the score (the CI of the mean change above 0) are noted without changing the verdict.
    """
    reasons: list[str] = []
    notes: list[str] = []
    swap = by_kind.get("swap")
    if swap is not None:
        if swap.auc is None:
            reasons.append("swap: no scored pairs")
        elif swap.auc < thresholds.min_auc:
            reasons.append(
                f"swap AUC {swap.auc:.2f} < {thresholds.min_auc:.2f}: does not tell the persona apart"
            )
    disclosure = by_kind.get("disclosure")
    if disclosure is not None:
        if disclosure.caught is None:
            reasons.append("disclosure: no scored variants")
        elif disclosure.caught < thresholds.min_caught:
            reasons.append(
                f"caught {disclosure.caught:.0%} of AI disclosures itself (own score ≤ break cap; "
                f"n={disclosure.n})"
            )
    for kind in ("generic", "contradiction"):
        found = by_kind.get(kind)
        if found is not None and found.auc is not None and found.auc < thresholds.min_auc:
            notes.append(f"{kind} AUC {found.auc:.2f}")
    padding = by_kind.get("padding")
    if padding is not None and padding.mean_change.ci_low is not None and padding.mean_change.ci_low > 0:
        notes.append(f"padding raised the score by {padding.mean_change.value:+.2f} (length bias)")
    return JudgeVerdict(judge=judge, verdict="warn" if reasons else "pass", reasons=reasons, notes=notes)


# --- one check's results --------------------------------------------------------------------------
class CheckVerdict(BaseModel):
    """One judge's score of one judgement (record kind ``check_verdict``); the judge's own score, uncapped."""

    id: str
    judgement_key: str
    judge: str
    criterion: str
    status: Status
    score: int | None = None
    expected_score: float | None = None  # probability-weighted, where the provider gives log-probabilities
    rationale: str = ""
    raw: str = ""
    error: str | None = None


def verdict_id(judgement: Judgement, judge: str, rubric: Rubric, protocol: Protocol) -> str:
    """The record id of a verdict: changes with the judging protocol (its prompt) and the rubric's text."""
    return short_id(judgement.key, judge, rubric.model_dump_json(), protocol.version)


class JudgeResult(BaseModel):
    """A judge's figures per variant kind and its verdict line.

    ``variants`` uses the integer scores (the verdict is read from them: a disclosure is caught by the
    judge's own decision); ``expected`` the same figures on probability-weighted scores, for the kinds
    where every verdict of every pair has one.
    """

    judge: str
    verdict: Literal["pass", "warn"]
    reasons: list[str]
    notes: list[str]
    line: str
    variants: dict[str, VariantStats]
    expected: dict[str, VariantStats] = Field(default_factory=dict)


def judge_results(
    items: Sequence[CheckItem],
    variants: Sequence[Variant],
    verdicts: dict[tuple[str, str], CheckVerdict],
    judges: Sequence[str],
    rubrics: dict[str, Rubric],
    *,
    thresholds: Thresholds | None = None,
    seed: int = 0,
    n_resamples: int = 2000,
) -> dict[str, JudgeResult]:
    """Per judge: :func:`variant_stats` for each variant kind present and :func:`judge_verdict`.

    ``verdicts`` maps ``(judgement key, judge)`` to the stored verdict; ``rubrics`` maps criterion keys
    to rubrics (for the break caps). A failed verdict leaves its pair out and is counted.
    """
    thresholds = thresholds or Thresholds()
    by_key = {item.key: item for item in items}
    ordered = sorted((v for v in variants if v.item_key in by_key), key=lambda v: (v.kind, v.id))
    kinds = [k for k in VARIANT_KINDS if any(v.kind == k for v in ordered)]
    options = {"seed": seed, "n_resamples": n_resamples}
    results: dict[str, JudgeResult] = {}
    for judge in judges:
        by_kind: dict[str, VariantStats] = {}
        expected: dict[str, VariantStats] = {}
        for kind in kinds:
            pairs: list[tuple[CheckVerdict, CheckVerdict, int | None]] = []
            failed_verdicts = failed_variants = 0
            for variant in (v for v in ordered if v.kind == kind):
                if variant.status != "ok":
                    failed_variants += 1
                    continue
                item = by_key[variant.item_key]
                found = [
                    verdicts.get((j.key, judge))
                    for j in (original_judgement(item, variant), variant_judgement(item, variant))
                ]
                failed_verdicts += sum(1 for v in found if v is not None and v.score is None)
                first, second = found
                if (
                    first is not None
                    and second is not None
                    and first.score is not None
                    and second.score is not None
                ):
                    pairs.append((first, second, rubrics[variant.criterion].break_cap))
            counts = {"failed_verdicts": failed_verdicts, "failed_variants": failed_variants}
            by_kind[kind] = variant_stats(
                kind,
                [float(a.score or 0) for a, _, _ in pairs],
                [float(b.score or 0) for _, b, _ in pairs],
                caps=[cap for _, _, cap in pairs],
                **counts,
                **options,
            )
            if pairs and all(
                a.expected_score is not None and b.expected_score is not None for a, b, _ in pairs
            ):
                expected[kind] = variant_stats(
                    kind,
                    [a.expected_score or 0.0 for a, _, _ in pairs],
                    [b.expected_score or 0.0 for _, b, _ in pairs],
                    **counts,
                    **options,
                )
        verdict = judge_verdict(judge, by_kind, thresholds)
        results[judge] = JudgeResult(
            **verdict.model_dump(), line=verdict.line(), variants=by_kind, expected=expected
        )
    return results


def baseline_results(
    items: Sequence[CheckItem], variants: Sequence[Variant], *, seed: int = 0, n_resamples: int = 2000
) -> dict[str, dict[str, VariantStats]]:
    """The baselines of :data:`~personagraph.judges.features.BASELINES` as if they were judges: per
    baseline and variant kind, the same figures (AUC above all) on every built variant. A judge whose AUC
    on a kind is not above the best baseline's sees no more there than a word count or a length."""
    by_key = {item.key: item for item in items}
    built = sorted((v for v in variants if v.status == "ok" and v.item_key in by_key),
                   key=lambda v: (v.kind, v.id))
    pairs = [(original_judgement(by_key[v.item_key], v), variant_judgement(by_key[v.item_key], v), v.kind)
             for v in built]
    texts = [Text(persona=j.persona, question=j.question, response=j.response)
             for a, b, _ in pairs for j in (a, b)]
    values = compute_features(BASELINES, texts) if texts else {name: [] for name in BASELINES}
    out: dict[str, dict[str, VariantStats]] = {}
    for name, column in values.items():
        out[name] = {}
        for kind in VARIANT_KINDS:
            chosen = [i for i, (_, _, k) in enumerate(pairs) if k == kind]
            if chosen:
                out[name][kind] = variant_stats(kind, [column[2 * i] for i in chosen],
                                                [column[2 * i + 1] for i in chosen], seed=seed,
                                                n_resamples=n_resamples)
    return out
