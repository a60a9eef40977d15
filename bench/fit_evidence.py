"""Fits the ``evidence`` judging protocol's model of Persona Consistency on the graded development files.

The inputs of each reply (``../shared/benchmarks/judge-dev/usr_knowledge.jsonl`` and ``usr_overall.jsonl``,
the same 150 replies, 30 dialogue contexts): the embedded judge's checklist answers as probabilities of
the good answer (``judges/checklists.yaml``: one call per reply, the call the ``evidence`` protocol makes,
cached in ``--cache`` so a re-fit makes 0 calls) and the text features of ``judges/features.py``. The
target is the share of the scale the humans gave, averaged over the two ratings: (Uses Knowledge + (Overall
− 1) / 4) / 2, so one score ranks replies on both (``--knowledge-weight`` moves the balance: a fit that
weighs Uses Knowledge more ranks it better and Overall worse). The model is a logistic regression on
standardised inputs with soft labels (each reply twice, as 1 and 0, weighted by its target share), L2
``--c``. Beside it, the grounding model (``GROUNDING_INPUTS``, target the Uses Knowledge rating alone) that
the ``answer: text`` checks of the other rubrics read; ``--write`` writes both.

Honest figures: contexts are held out, never replies — 5-fold cross-validation by context, repeated
``--repeats`` times with shuffled folds; each fold standardises and fits on its training contexts only.
Printed per candidate input set (every set tried is listed in ``CANDIDATES``; the choice among them is
made on these cross-validated figures, so even they are optimistic for the chosen one, and the features
were designed looking at these files): Spearman ρ with each human rating (mean over repeats; 95%
bootstrap CI over replies of the first repeat's pooled predictions), beside the baselines. ``--write``
refits the chosen set on all 150 replies and writes ``personagraph/judges/evidence.yaml``.

    .venv/bin/python bench/fit_evidence.py                      # CV table of every candidate set
    .venv/bin/python bench/fit_evidence.py --write              # and write the chosen model
    .venv/bin/python bench/fit_evidence.py --no-checks          # no judge call: the text-only sets

Tune on these files only: held-out contexts of the same source check the final figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from sklearn.linear_model import LogisticRegression

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._harness import load_average, machine  # noqa: E402
from personagraph.judges.features import BASELINES, Text  # noqa: E402
from personagraph.judges.features import compute as compute_features  # noqa: E402
from personagraph.judges.judge import score_response  # noqa: E402
from personagraph.judges.meta_eval import CriterionCatalogue, MetaItem, load_items, question_text  # noqa: E402
from personagraph.judges.protocols import EVIDENCE_FILE, fitted_gates, get_protocol  # noqa: E402
from personagraph.judges.stats import Estimate, bootstrap_ci, spearman, spearman_difference  # noqa: E402
from personagraph.likelihood import precision, scoring_model  # noqa: E402
from personagraph.models import ModelClient, ModelSettings  # noqa: E402
from personagraph.models.openai_http import close_sessions  # noqa: E402
from personagraph.store import RunStore  # noqa: E402

DEV = Path(__file__).resolve().parents[2] / "shared" / "benchmarks" / "judge-dev"
PACKAGE = Path(__file__).resolve().parents[1] / "personagraph"
JUDGE_MAX_TOKENS = 256
CACHE = Path.home() / ".cache" / "personagraph" / "bench-evidence"
TEXT = ("new_persona_stems", "fact_similarity", "repetition", "relevance")
BY_SENTENCE = ("new_persona_stems", "sentence_fact_similarity", "repetition", "relevance")
CHECKS = ("check:fact", "check:no_contradiction", "check:sensible")
LIKELIHOOD_SET = ("new_persona_stems", "sentence_fact_similarity", "repetition", "persona_pmi",
                  "dialogue_pmi")
STATED_SET = ("stated_persona_stems", *LIKELIHOOD_SET[1:])
KNOWLEDGE_SET = ("knowledge_stems", *LIKELIHOOD_SET[1:])
# Every input set tried, in the order they were tried; CHOSEN is the one written.
CANDIDATES: dict[str, tuple[str, ...]] = {
    "text: knowledge": ("new_persona_stems", "fact_similarity"),
    "text": TEXT,
    "checks": CHECKS,
    "checks + knowledge text": (*CHECKS, "new_persona_stems", "fact_similarity"),
    "checks + text": (*CHECKS, *TEXT),
    "text, facts by sentence": BY_SENTENCE,
    "by sentence + likelihood": (*BY_SENTENCE, "persona_pmi", "dialogue_pmi"),
    "by sentence + likelihood, no relevance": LIKELIHOOD_SET,
    "stated stems + likelihood": STATED_SET,
    "knowledge stems + likelihood": KNOWLEDGE_SET,
}
# Chosen on the cross-validated figures (10 repeats, 2026-12-01, local:qwen2.5-coder-1.5b): "text" 0.764 /
# 0.559 (Uses Knowledge / Overall); the 1.5B's checklist answers alone 0.273 / 0.263, and adding them to the
# text evidence lowered both (0.739 / 0.556). So the fitted score reads text evidence only; the judge's
# call still decides the gate (an AI disclosure takes the score to the minimum). Then "text, facts by
# sentence" (the best cosine of one reply sentence and one fact, where the whole reply was embedded):
# 0.779 / 0.569. Tried beside it and not kept (10 repeats): shared stems weighted by word rarity (wordfreq's
# Zipf frequencies: 0.779 / 0.574 with it, not worth a 57 MB dependency for +0.005), fact coverage, facts
# touched, a reply's mean word rarity (specificity), clauses cut at commas and "and"/"but" (0.775 / 0.555).
# With checklist prompt version 3 (no rubric descriptions) the checks alone fell to 0.080 / 0.055 and
# "checks + text" reads 0.745 / 0.545: the chosen set reads no check, so its fit is unchanged.
# Then the packaged 0.5B's likelihood of the reply (judges/features.py: persona_pmi, dialogue_pmi;
# llama-server cannot score a given text, so personagraph/likelihood.py runs the GGUF with torch): "by
# sentence + likelihood" 0.790 / 0.596, without the MiniLM relevance cosine (which dialogue_pmi stands in
# for) 0.800 / 0.588 — chosen, one input fewer. The same features from the 1.5B (the judge's own model)
# read 0.792 / 0.619 (with relevance 0.784 / 0.622; a prototype's figures, /tmp script, same prompts), but
# cost ~3x the CPU per verdict (2 forward passes of ~2 s on 2 cores) and 6 GB of memory in fp32, so the
# 0.5B is packaged; mean log-likelihood and the lowest token's log-likelihood added nothing (±0.01).
# 2026-12-02 (prototype figures, /tmp script, 10 repeats, the 0.5B): added to the chosen set, persona PMI per
# fact (the best of log P(reply | one fact, dialogue) − log P(reply | dialogue), 5 more passes) 0.796 /
# 0.586, in place of persona_pmi 0.787 / 0.585; backward PMI (log P(persona | dialogue, reply) − log
# P(persona | dialogue), 2 more passes) 0.797 / 0.600; mean log-likelihood given the dialogue 0.799 / 0.585.
# None kept: ±0.01 is the noise of a choice among sets, and each costs forward passes. The largest
# misranked Uses Knowledge replies were questions back to the partner on a persona topic ("what is your
# favorite food ?", "wow you have a farm ?": rated 0, scored high), so stated_persona_stems counts the
# persona stems of statements only: "stated stems + likelihood" 0.804 / 0.590 — chosen (no extra cost; the
# gain is within noise, the rule is what Uses Knowledge asks).
# 2026-12-02, fourteenth stop: the likelihood features from the 1.5B instead of the 0.5B, computed in bf16
# (personagraph/likelihood.py: 2.1 s per 250-token pass on the AVX512-BF16 EPYC, where the 1.5B in fp32 took
# 6.8 s and the 0.5B in fp32 1.4-1.6 s): the same chosen set 0.802 / 0.619 against 0.804 / 0.590; paired, the
# 1.5B's fit minus the 0.5B's on the same folds (3 fold seeds) Uses Knowledge −0.002 to +0.004 (CIs ±0.02),
# Overall +0.026 [+0.003, +0.053], +0.033 [+0.007, +0.062], +0.031 [+0.007, +0.059]. The set was not
# re-chosen: "by sentence + likelihood" reads 0.787 / 0.624 with the 1.5B, within noise of the chosen one.
# 2026-12-02, fifteenth stop (prototype figures on the cached inputs, /tmp scripts, mean of 20 fold seeds; the
# set, C and target were not re-chosen). stated_persona_stems alone: 0.800 on Uses Knowledge, 0.476 Overall:
# the fit's gain is on Overall. Moving the target towards Uses Knowledge (--knowledge-weight 0.55 / 0.6 / 0.7:
# 0.810 / 0.610, 0.815 / 0.601, 0.821 / 0.585) walks a frontier; 0.5 leaves both ratings a like margin over
# 0.80 / 0.60. log(1 + stated stems) for the count: +0.010 on Uses Knowledge in all 20 seeds, −0.004 on
# Overall in 19 — the same trade. C 0.1 / 0.3 / 3 / 10: 0.796 / 0.626 to 0.803 / 0.617; signed log of the
# PMIs 0.806 / 0.596; all pairwise products 0.791 / 0.609, each single product within ±0.01. The 1.5B per
# persona fact without the dialogue (~11 short passes, 4 s per reply): max over facts of log P(reply | fact)
# − log P(reply) alone 0.631 / 0.389, added 0.798 / 0.618; of log P(fact | reply) − log P(fact) per token
# alone 0.742 / 0.511, added 0.809 / 0.623 — none kept, ±0.01 for seconds more per verdict.
# 2026-12-02, sixteenth stop (the cached inputs, /tmp scripts, 20 fold seeds, the 1.5B's likelihoods). Of the
# stated-stem replies rated 0 the count matched "love" most ("i love to travel" for "I love dogs"): attitude
# words frame a fact, they do not state it. Three rules of the count, 12 variants in all: attitude words
# (features.ATTITUDE_WORDS, the list written as a class, not from the replies) left out or not; the partner's
# words left out over the whole dialogue, the answered line only, or not at all; a question's clause before
# its last comma counted as a statement ("i am a teacher , what do you do ?") or not. Alone, the count's best
# variant ranked Uses Knowledge 0.833 (attitude words out, answered line only, clauses), but in the fit the
# likelihoods carry what the partner rules add: "stated stems + likelihood" 0.801 / 0.618, attitude words
# left out 0.810 / 0.626 (higher on both ratings in 20 of 20 seeds: +0.009 / +0.008), answered line only
# 0.796 / 0.609, no partner rule 0.783 / 0.598, clauses ±0.002. Choosing among the 12 inside each training
# fold (nested CV, by the mean of the two ρ on 4 inner folds) reads 0.806 / 0.621 and picks attitude words
# out, whole dialogue, in 94 of 100 folds. "knowledge stems + likelihood" (features.knowledge_stems: attitude
# words out, the rest as before) — chosen.
CHOSEN = "knowledge stems + likelihood"
# The grounding model (judges/evidence.yaml `grounding`; judges/protocols.grounding_model): P(the reply draws
# on the persona's facts) from text alone, for the rubrics without graded data (their `answer: text` checks).
# Its target is the Uses Knowledge rating alone, the question those checks ask; its inputs the two cheap
# text features of CHOSEN (no likelihood pass: it scores three of the five verdicts of every question).
# 2026-12-03, 10 repeats: 0.820 with Uses Knowledge (the stem count alone 0.807 as a raw ranking, the MiniLM
# cosine 0.756), chosen as the first set tried; it was not scored on bench/rubric_dev before it was written.
GROUNDING_INPUTS = ("knowledge_stems", "sentence_fact_similarity")


def load_dev(dev: Path) -> tuple[list[MetaItem], np.ndarray, np.ndarray]:
    """The replies and their mean human ratings: Uses Knowledge (0–1) and Overall (1–5)."""
    catalogue = CriterionCatalogue()
    knowledge = {i.id: i for i in load_items(dev / "usr_knowledge.jsonl", catalogue)}
    overall = {i.id: i for i in load_items(dev / "usr_overall.jsonl", catalogue)}
    ids = sorted(knowledge.keys() & overall.keys())
    return ([knowledge[i] for i in ids], np.array([knowledge[i].human_mean for i in ids]),
            np.array([overall[i].human_mean for i in ids]))


async def read_checks(items: list[MetaItem], judge: str, cache: Path, base_url: str | None,
                      concurrency: int) -> tuple[list[dict[str, float | None]], float]:
    """The judge's checklist P(good)s per reply (cached), and the mean seconds per verdict sent."""
    store = RunStore(cache)
    settings = ModelSettings(base_url=base_url, concurrency=concurrency, seed=0, temperature=0.0,
                             max_tokens=JUDGE_MAX_TOKENS, timeout_s=600)
    client = ModelClient.create(judge, "judge", store=store, settings=settings)
    rubric = CriterionCatalogue().resolve("persona_consistency").rubric
    protocol = get_protocol("checklist", judge)
    gate = asyncio.Semaphore(concurrency)
    seconds: list[float] = []

    async def one(item: MetaItem) -> dict[str, float | None]:
        async with gate:
            started = time.perf_counter()
            scored = await score_response(client, rubric, persona=item.persona, question=question_text(item),
                                          response=item.response, protocol=protocol)
            if scored.status != "ok":
                raise SystemExit(f"{item.id}: the judge's reply failed: {scored.error}")
            if not scored.cached:
                seconds.append(time.perf_counter() - started)
            return scored.inputs

    try:
        results = await asyncio.gather(*(one(item) for item in items))
    finally:
        await close_sessions()
        store.close()
    return list(results), (float(np.mean(seconds)) if seconds else float("nan"))


def target(knowledge: np.ndarray, overall: np.ndarray, knowledge_weight: float = 0.5) -> np.ndarray:
    """The share of the scale the humans gave, the two ratings averaged (Uses Knowledge weighed
    ``knowledge_weight``, Overall the rest)."""
    return knowledge_weight * knowledge + (1 - knowledge_weight) * (overall - 1) / 4


def fit(x: np.ndarray, share: np.ndarray, c: float) -> tuple[np.ndarray, np.ndarray, LogisticRegression]:
    """Standardisation and a soft-label logistic regression: each reply as 1 (weight share) and 0."""
    mean, scale = x.mean(0), x.std(0)
    scale[scale == 0] = 1.0
    z = (x - mean) / scale
    model = LogisticRegression(C=c, max_iter=1000)
    labels = np.r_[np.ones(len(z)), np.zeros(len(z))]
    model.fit(np.vstack([z, z]), labels, sample_weight=np.r_[share, 1 - share])
    return mean, scale, model


def cross_validate(x: np.ndarray, share: np.ndarray, groups: np.ndarray, c: float, repeats: int,
                   seed: int) -> list[np.ndarray]:
    """Predictions for every reply from models that never saw its context (5 folds by context, or one per
    context when there are fewer)."""
    contexts = np.unique(groups)
    k = min(5, len(contexts))  # judge_protocols --usr-contexts 2: each context held out once
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(repeats):
        fold_of = {g: i % k for i, g in enumerate(rng.permutation(contexts))}
        folds = np.array([fold_of[g] for g in groups])
        pred = np.zeros(len(share))
        for f in range(k):
            train, test = folds != f, folds == f
            mean, scale, model = fit(x[train], share[train], c)
            pred[test] = model.predict_proba((x[test] - mean) / scale)[:, 1]
        out.append(pred)
    return out


def rho_ci(pred: np.ndarray, human: np.ndarray, seed: int) -> tuple[float, float, float]:
    """Spearman ρ with a 95% bootstrap CI over replies."""
    value = float(spearman(pred, human))
    low, high = bootstrap_ci(np.arange(len(pred)), lambda idx: float(spearman(pred[idx.astype(int)],
                                                                               human[idx.astype(int)])),
                             seed=seed, n_resamples=1000, method="percentile")
    return value, low, high


def against_best(pred: np.ndarray, columns: dict[str, list[float]], human: np.ndarray, seed: int,
                 keep: list[int] | None = None) -> tuple[str, Estimate]:
    """The baseline with the highest ρ with ``human``, and ``pred``'s ρ minus its ρ on the replies ``keep``
    (all when None; ``pred`` holds those replies only), with a paired bootstrap CI."""
    best = max(BASELINES, key=lambda name: spearman(columns[name], human))
    rows = np.arange(len(human)) if keep is None else np.asarray(keep)
    return best, spearman_difference(pred, np.asarray(columns[best])[rows], human[rows], seed=seed)


def _row(k: tuple[float, ...], o: tuple[float, ...]) -> str:
    return f"{k[0]:8.3f} [{k[1]:.3f}, {k[2]:.3f}]    {o[0]:8.3f} [{o[1]:.3f}, {o[2]:.3f}]"


def _entry(inputs: tuple[str, ...], columns: dict[str, list[float]], share: np.ndarray, c: float,
           fitted_on: str) -> dict[str, Any]:
    """A model fitted on every reply, as judges/evidence.yaml holds it."""
    mean, scale, model = fit(np.column_stack([columns[n] for n in inputs]), share, c)
    return {"inputs": list(inputs), "mean": [round(float(v), 6) for v in mean],
            "scale": [round(float(v), 6) for v in scale],
            "weights": [round(float(v), 6) for v in model.coef_[0]],
            "intercept": round(float(model.intercept_[0]), 6), "fitted_on": fitted_on}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dev", type=Path, default=DEV)
    parser.add_argument("--judge", default="local:qwen2.5-coder-1.5b")
    parser.add_argument("--base-url", default=None)
    parser.add_argument("--cache", type=Path, default=CACHE,
                        help="run store of the judge's calls (a re-fit makes 0 calls)")
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--c", type=float, default=1.0, help="inverse L2 strength of the logistic model")
    parser.add_argument("--knowledge-weight", type=float, default=0.5,
                        help="Uses Knowledge's weight in the target (Overall's: the rest; packaged: 0.5)")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--write", action="store_true", help=f"write personagraph/{EVIDENCE_FILE}")
    parser.add_argument("--no-checks", action="store_true",
                        help="make no judge call: skip the input sets that read the checklist's answers")
    args = parser.parse_args()
    if not 0 <= args.knowledge_weight <= 1:
        parser.error(f"--knowledge-weight {args.knowledge_weight}: must be within [0, 1]")

    print(machine(), flush=True)
    items, knowledge, overall = load_dev(args.dev)
    groups = np.array([i.id.rsplit("-", 1)[0] for i in items])
    texts = [Text(persona=i.persona, question=question_text(i), response=i.response) for i in items]
    text_inputs = (n for inputs in CANDIDATES.values() for n in inputs if not n.startswith("check:"))
    features = compute_features(tuple(dict.fromkeys((*text_inputs, *BASELINES))), texts)
    candidates = {label: inputs for label, inputs in CANDIDATES.items()
                  if not (args.no_checks and any(n.startswith("check:") for n in inputs))}
    columns: dict[str, list[float]] = dict(features)
    if args.no_checks:
        print(f"{len(items)} replies, {len(set(groups))} contexts; no judge call (--no-checks): "
              f"{len(CANDIDATES) - len(candidates)} input sets that read checks skipped")
    else:
        checks, seconds = asyncio.run(read_checks(items, args.judge, args.cache, args.base_url,
                                                  args.concurrency))
        if any(v is None for row in checks for v in row.values()):
            raise SystemExit("the judge returned no log-probabilities: the checks' P(good) cannot be read")
        columns.update({name: [float(row[name]) for row in checks] for name in CHECKS})
        print(f"{len(items)} replies, {len(set(groups))} contexts; judge {args.judge}: "
              f"{seconds:.1f} s per verdict sent (cached calls not counted)")
    share = target(knowledge, overall, args.knowledge_weight)
    print(f"\n{'inputs':34} {'ρ Uses Knowledge [95% CI]':>28} {'ρ Overall [95% CI]':>26}")
    for name in BASELINES:
        values = np.asarray(columns[name])
        k, o = rho_ci(values, knowledge, args.seed), rho_ci(values, overall, args.seed)
        print(f"{'baseline: ' + name:34} {_row(k, o)}")
    results: dict[str, Any] = {}
    for label, inputs in candidates.items():
        x = np.column_stack([columns[n] for n in inputs])
        preds = cross_validate(x, share, groups, args.c, args.repeats, args.seed)
        k_mean = float(np.mean([spearman(p, knowledge) for p in preds]))
        o_mean = float(np.mean([spearman(p, overall) for p in preds]))
        k, o = rho_ci(preds[0], knowledge, args.seed), rho_ci(preds[0], overall, args.seed)
        results[label] = {"knowledge": k_mean, "overall": o_mean}
        shown = label + (" (chosen)" if label == CHOSEN else "")
        print(f"{shown:34} {_row((k_mean, *k[1:]), (o_mean, *o[1:]))}")
    print(f"(cross-validated by context, {args.repeats} repeats; CI from the first repeat)")
    chosen = cross_validate(np.column_stack([columns[n] for n in CANDIDATES[CHOSEN]]), share, groups, args.c,
                            1, args.seed)[0]
    for rating, human in (("Uses Knowledge", knowledge), ("Overall", overall)):
        best, d = against_best(chosen, columns, human, args.seed)
        print(f"{CHOSEN} − baseline {best} on {rating}: {d.value:+.3f} [{d.ci_low:+.3f}, {d.ci_high:+.3f}] "
              "(paired bootstrap over replies, first repeat's CV predictions)")
    x = np.column_stack([columns[n] for n in GROUNDING_INPUTS])
    grounding_preds = cross_validate(x, knowledge, groups, args.c, args.repeats, args.seed)
    grounding_rho = float(np.mean([spearman(p, knowledge) for p in grounding_preds]))
    k = rho_ci(grounding_preds[0], knowledge, args.seed)
    print(f"{'grounding (target Uses Knowledge)':34} {k[0]:8.3f} [{k[1]:.3f}, {k[2]:.3f}]    "
          f"(mean {grounding_rho:.3f} over the repeats; inputs {', '.join(GROUNDING_INPUTS)})")
    print(f"load average at end {load_average()}")
    weighted = "" if args.knowledge_weight == 0.5 else f" --knowledge-weight {args.knowledge_weight}"
    command = f"C={args.c}: python bench/fit_evidence.py --write{weighted}; cross-validated by context: "
    entry = _entry(CANDIDATES[CHOSEN], columns, share, args.c,
                   f"{len(items)} replies of judge-dev usr_knowledge + usr_overall, judge {args.judge}, "
                   f"likelihoods {scoring_model()} in {precision()}, {command}"
                   f"ρ knowledge {results[CHOSEN]['knowledge']:.3f}, "
                   f"overall {results[CHOSEN]['overall']:.3f}")
    grounding = _entry(GROUNDING_INPUTS, columns, knowledge, args.c,
                       f"{len(items)} replies of judge-dev usr_knowledge (its rating alone), {command}"
                       f"ρ knowledge {grounding_rho:.3f}")
    print("chosen model:", json.dumps(entry))
    print("grounding model:", json.dumps(grounding))
    if args.write:
        path = PACKAGE / EVIDENCE_FILE
        header = "".join(line for line in path.read_text(encoding="utf-8").splitlines(keepends=True)
                         if line.startswith("#"))
        body = {"version": 1, "gates": fitted_gates(),  # how the gates are read is kept as it was
                "models": {"Persona Consistency": entry}, "grounding": grounding}
        path.write_text(header + yaml.safe_dump(body, sort_keys=False, width=100), encoding="utf-8")
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
