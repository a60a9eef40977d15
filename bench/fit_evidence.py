"""Fits the ``evidence`` judging protocol's model of Persona Consistency on two graded sources, and shows
whether it holds on the one it was not fitted to.

Sources (``../shared/benchmarks/judge-dev``): USR PersonaChat (``usr_knowledge.jsonl`` and
``usr_overall.jsonl``: 150 dialogue replies, 30 contexts; target the share of the scale people gave,
(Uses Knowledge + (Overall − 1) / 4) / 2) and CharacterBench's attribute consistency
(``characterbench_attribute_consistency_bot.jsonl`` and ``…_human.jsonl``: role-play replies scored 1–4
against the character's profile, 1 for a contradiction; target (score − 1) / 3). Inputs: the text and
likelihood features of ``judges/features.py`` (the likelihoods read from the embedded 1.5B's engine; no
judge call: the fitted model reads none). The model is a logistic regression on standardised inputs
with soft labels (each reply twice, as 1 and 0, weighted by its target share), L2 ``--c``.

Honest figures, printed per candidate input set beside the baselines:

* **cross-source**: fitted on one source, scored on the other (each way) — the test of a method that must
  hold on data it was not fitted to;
* **within**: 5-fold cross-validation by group (USR by dialogue context, CharacterBench by character),
  repeated ``--repeats`` times, fitted on both sources' training groups;
* Spearman ρ per file with a 95% bootstrap CI, and the ROC AUC of CharacterBench replies scored 1 against
  those scored 4.

``--write`` refits the chosen set on every reply of both sources and writes
``personagraph/judges/evidence.yaml``. Features are cached in ``--cache`` (a re-fit computes none).

    .venv/bin/python bench/fit_evidence.py                # the table
    .venv/bin/python bench/fit_evidence.py --write        # and write the chosen model

Tune on these files only: held-out characters and contexts of the same sources check the final figures.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from sklearn.linear_model import LogisticRegression

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._harness import load_average, machine  # noqa: E402
from personagraph.judges.features import (  # noqa: E402
    BASELINES,
    LIKELIHOOD,
    EngineReading,
    Text,
    _character_fit_messages,
    compute,
    engine_readings,
)
from personagraph.judges.meta_eval import CriterionCatalogue, MetaItem, load_items, question_text  # noqa: E402
from personagraph.judges.protocols import EVIDENCE_FILE  # noqa: E402
from personagraph.judges.stats import Estimate, bootstrap_ci, spearman, spearman_difference  # noqa: E402
from personagraph.judges.validity import roc_auc  # noqa: E402
from personagraph.likelihood import (
    scoring_model,  # noqa: E402
    yes_probability,  # noqa: E402
)
from personagraph.models.openai_http import close_sessions  # noqa: E402

DEV = Path(__file__).resolve().parents[2] / "shared" / "benchmarks" / "judge-dev"
PACKAGE = Path(__file__).resolve().parents[1] / "personagraph"
CACHE = Path.home() / ".cache" / "personagraph" / "bench-evidence"
CB_FILES = ("characterbench_attribute_consistency_bot.jsonl",
            "characterbench_attribute_consistency_human.jsonl")
TEXT = ("knowledge_stems", "sentence_fact_similarity", "repetition")
# Every input set tried, in the order they were tried. The one written is chosen by rule (:func:`choose`):
# the highest mean cross-source ρ. The choice's history: docs/benchmarks.md#fitting-the-evidence-model.
LIKELIHOODS = ("persona_pmi", "dialogue_pmi")
CANDIDATES: dict[str, tuple[str, ...]] = {
    "text": TEXT,
    "text + likelihood": (*TEXT, *LIKELIHOODS),
    "text + persona likelihood": (*TEXT, "persona_pmi"),
    "text + likelihood + character fit": (*TEXT, *LIKELIHOODS, "character_fit"),
    "text + likelihood + character fit + mean log-likelihood": (*TEXT, *LIKELIHOODS, "character_fit",
                                                                "response_loglik"),
    "text + persona gain + character fit": (*TEXT, "persona_gain", "dialogue_pmi", "character_fit"),
    "likelihood + character fit": (*LIKELIHOODS, "character_fit"),
    "character fit": ("character_fit",),
}
# The grounding model (judges/evidence.yaml `grounding`; judges/protocols.grounding_model): P(the reply draws
# on the persona's facts) from text alone, for the rubrics without a fitted model (their `answer: text`
# checks). Target: the Uses Knowledge rating alone, the question those checks ask.
GROUNDING_INPUTS = ("knowledge_stems", "sentence_fact_similarity")


@dataclass(frozen=True)
class Reply:
    """One graded reply: its source, the group cross-validation holds out together, and its target."""

    source: str  # "usr" or the CharacterBench file's short name
    group: str
    item: MetaItem
    target: float  # the share of the scale people gave
    human: float  # the rating ρ is read against (USR: Overall; see knowledge)
    knowledge: float | None = None  # USR's Uses Knowledge rating


def load(dev: Path) -> list[Reply]:
    """Both sources' replies."""
    catalogue = CriterionCatalogue()
    knowledge = {i.id: i for i in load_items(dev / "usr_knowledge.jsonl", catalogue)}
    overall = {i.id: i for i in load_items(dev / "usr_overall.jsonl", catalogue)}
    out = [Reply("usr", i.rsplit("-", 1)[0], knowledge[i],
                 (knowledge[i].human_mean + (overall[i].human_mean - 1) / 4) / 2, overall[i].human_mean,
                 knowledge[i].human_mean) for i in sorted(knowledge.keys() & overall.keys())]
    for file in CB_FILES:
        name = "cb_" + file.split("_")[-1].removesuffix(".jsonl")
        for item in load_items(dev / file, catalogue):
            group = hashlib.sha256(item.persona.encode()).hexdigest()[:12]  # the character
            out.append(Reply(name, group, item, (item.human_mean - 1) / 3, item.human_mean))
    return out


async def features(replies: list[Reply], names: tuple[str, ...], cache: Path) -> dict[str, np.ndarray]:
    """Every named feature of every reply, from the cache where computed before. The cache keeps what the
    engine read of each response (``features.EngineReading``: token log-probabilities and the
    character-fit answer), not the features read from it, so a new reading of them computes nothing."""
    cache.mkdir(parents=True, exist_ok=True)
    store = cache / f"logprobs-{scoring_model()}.jsonl"
    known: dict[str, dict[str, Any]] = {}
    if store.is_file():
        for line in store.read_text(encoding="utf-8").splitlines():
            _remember(known, json.loads(line))
    texts = [Text(persona=r.item.persona, question=question_text(r.item), response=r.item.response)
             for r in replies]
    keys = [hashlib.sha256(json.dumps([t.persona, t.question, t.response]).encode()).hexdigest()
            for t in texts]
    local = tuple(n for n in names if n not in LIKELIHOOD)
    engine = len(local) < len(names)
    todo = [k for k, key in enumerate(keys)
            if any(n not in known.get(key, {}) for n in local)
            or (engine and not {"logprobs", "character_fit"} <= known.get(key, {}).keys())]
    started, batch = time.perf_counter(), 8
    try:
        for first in range(0, len(todo), batch):
            chunk = todo[first:first + batch]
            values = await asyncio.to_thread(compute, local, [texts[k] for k in chunk])
            rows = [{"key": keys[k], "values": {n: values[n][j] for n in local}} for j, k in enumerate(chunk)]
            if engine:
                await _engine_rows([texts[k] for k in chunk], [known.get(keys[k], {}) for k in chunk], rows)
            with store.open("a", encoding="utf-8") as out:
                for row in rows:
                    _remember(known, row)
                    out.write(json.dumps(row) + "\n")
            spent = time.perf_counter() - started
            print(f"  features: {first + len(chunk)}/{len(todo)} replies, {spent:.0f} s", flush=True)
    finally:
        await close_sessions()
    if todo:
        each = (time.perf_counter() - started) / len(todo)
        print(f"features of {len(todo)} replies computed: {each:.1f} s per reply "
              f"({'with' if engine else 'without'} the engine's readings)", flush=True)
    readings = {key: EngineReading(*known[key]["logprobs"], known[key]["character_fit"])
                for key in keys if engine}
    return {n: np.array([LIKELIHOOD[n](readings[key]) if n in LIKELIHOOD else known[key][n]
                         for key in keys]) for n in names}


def _remember(known: dict[str, dict[str, Any]], row: dict[str, Any]) -> None:
    """A cache row (``key``; ``values``, and what the engine read: ``logprobs``, ``character_fit``) merged
    into what is known of its reply."""
    entry = known.setdefault(row["key"], {})
    entry.update(row.get("values", {}))
    if "logprobs" in row:
        entry["logprobs"] = [np.array(v) for v in row["logprobs"]]
    if "character_fit" in row:
        entry["character_fit"] = row["character_fit"]


async def _engine_rows(texts: list[Text], known: list[dict[str, Any]], rows: list[dict[str, Any]]) -> None:
    """What the engine reads of each text, into its cache row: all of it, or the character-fit answer
    alone where the log-probabilities are cached."""
    full = [j for j, entry in enumerate(known) if "logprobs" not in entry]
    fit_only = [j for j, entry in enumerate(known) if "logprobs" in entry and "character_fit" not in entry]
    readings = await engine_readings([texts[j] for j in full])
    for j, reading in zip(full, readings, strict=True):
        arrays = (reading.with_persona, reading.with_dialogue, reading.alone)
        rows[j]["logprobs"] = [v.tolist() for v in arrays]
        rows[j]["character_fit"] = reading.character_fit
    fits = await asyncio.gather(*(yes_probability(_character_fit_messages(texts[j])) for j in fit_only))
    for j, fit in zip(fit_only, fits, strict=True):
        rows[j]["character_fit"] = fit


def fit(x: np.ndarray, share: np.ndarray, c: float) -> tuple[np.ndarray, np.ndarray, LogisticRegression]:
    """Standardisation and a soft-label logistic regression: each reply as 1 (weight share) and 0."""
    mean, scale = x.mean(0), x.std(0)
    scale[scale == 0] = 1.0
    z = (x - mean) / scale
    model = LogisticRegression(C=c, max_iter=1000)
    labels = np.r_[np.ones(len(z)), np.zeros(len(z))]
    model.fit(np.vstack([z, z]), labels, sample_weight=np.r_[share, 1 - share])
    return mean, scale, model


def predict(fitted: tuple[np.ndarray, np.ndarray, LogisticRegression], x: np.ndarray) -> np.ndarray:
    mean, scale, model = fitted
    return model.predict_proba((x - mean) / scale)[:, 1]


def cross_validate(x: np.ndarray, share: np.ndarray, groups: np.ndarray, c: float, repeats: int,
                   seed: int) -> list[np.ndarray]:
    """Predictions for every reply from models that never saw its group (5 folds by group)."""
    names = np.unique(groups)
    k = min(5, len(names))
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(repeats):
        fold_of = {g: i % k for i, g in enumerate(rng.permutation(names))}
        folds = np.array([fold_of[g] for g in groups])
        pred = np.zeros(len(share))
        for f in range(k):
            train, test = folds != f, folds == f
            pred[test] = predict(fit(x[train], share[train], c), x[test])
        out.append(pred)
    return out


def cross_source(x: np.ndarray, share: np.ndarray, first: np.ndarray, c: float) -> np.ndarray:
    """Predictions for the replies of each source (``first`` and the rest) from a model fitted on the other
    source only."""
    pred = np.zeros(len(share))
    pred[~first] = predict(fit(x[first], share[first], c), x[~first])
    pred[first] = predict(fit(x[~first], share[~first], c), x[first])
    return pred


def rho_ci(pred: np.ndarray, human: np.ndarray, seed: int) -> tuple[float, float, float]:
    """Spearman ρ with a 95% bootstrap CI over replies."""
    value = float(spearman(pred, human))
    low, high = bootstrap_ci(np.arange(len(pred)), lambda idx: float(spearman(pred[idx.astype(int)],
                                                                               human[idx.astype(int)])),
                             seed=seed, n_resamples=1000, method="percentile")
    return value, low, high


def against_best(pred: np.ndarray, columns: dict[str, np.ndarray], human: np.ndarray,
                 seed: int) -> tuple[str, Estimate]:
    """The baseline with the highest ρ with ``human``, and ``pred``'s ρ minus its ρ (paired bootstrap)."""
    best = max(BASELINES, key=lambda name: spearman(columns[name], human))
    return best, spearman_difference(pred, columns[best], human, seed=seed)


def file_figures(pred: np.ndarray, replies: list[Reply], columns: dict[str, np.ndarray],
                 seed: int) -> list[str]:
    """Per file: ρ [CI], the difference to its best baseline, and (CharacterBench) AUC of 1 against 4."""
    out = []
    sources = sorted({r.source for r in replies}, key=lambda s: (s != "usr", s))
    for source in sources:
        rows = np.array([k for k, r in enumerate(replies) if r.source == source])
        ratings = [("overall", np.array([replies[k].human for k in rows]))]
        if source == "usr":
            ratings.insert(0, ("knowledge", np.array([replies[k].knowledge for k in rows])))
        for label, human in ratings:
            rho = rho_ci(pred[rows], human, seed)
            best, d = against_best(pred[rows], {n: v[rows] for n, v in columns.items()}, human, seed)
            name = f"{source}/{label}" if source == "usr" else source
            text = (f"{name} ρ {rho[0]:+.3f} [{rho[1]:+.3f}, {rho[2]:+.3f}] − {best} {d.value:+.3f} "
                    f"[{d.ci_low:+.3f}, {d.ci_high:+.3f}]")
            if source != "usr":
                auc = roc_auc(pred[rows][human == 4], pred[rows][human == 1])
                text += f", AUC 1 vs 4 {auc:.3f}"
            out.append(text)
    return out


def ratings_rho(predictions: list[np.ndarray], replies: list[Reply]) -> dict[str, float]:
    """Mean Spearman ρ over ``predictions`` per rating: USR knowledge and overall, each CharacterBench
    file."""
    out: dict[str, float] = {}
    for source in sorted({r.source for r in replies}, key=lambda s: (s != "usr", s)):
        rows = np.array([k for k, r in enumerate(replies) if r.source == source])
        ratings = {"usr_overall": [replies[k].human for k in rows]} if source == "usr" else {
            source: [replies[k].human for k in rows]}
        if source == "usr":
            ratings = {"usr_knowledge": [replies[k].knowledge for k in rows], **ratings}
        for name, human in ratings.items():
            out[name] = float(np.mean([spearman(p[rows], np.array(human)) for p in predictions]))
    return out


USR_FLOOR = {"usr_knowledge": 0.80, "usr_overall": 0.60}
"""What a refit must keep on USR (cross-validated by context): the packaged model's level."""


def choose(results: dict[str, dict[str, dict[str, float]]]) -> str | None:
    """Of the input sets that keep USR at :data:`USR_FLOOR` (within-source CV), the one with the highest
    mean cross-source ρ (within-source when there is one source): a set that does not carry from one
    source to the other is not chosen, however well it fits each. None when no set keeps the floor."""
    kind = "cross" if all("cross" in figures for figures in results.values()) else "within"
    kept = [label for label, figures in results.items()
            if all(figures["within"].get(name, 0.0) >= floor for name, floor in USR_FLOOR.items())]
    return max(kept, key=lambda label: float(np.mean(list(results[label][kind].values()))), default=None)


def _entry(inputs: tuple[str, ...], columns: dict[str, np.ndarray], share: np.ndarray, c: float,
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
    parser.add_argument("--cache", type=Path, default=CACHE, help="where computed features are kept")
    parser.add_argument("--c", type=float, default=1.0, help="inverse L2 strength of the logistic model")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--write", action="store_true", help=f"write personagraph/{EVIDENCE_FILE}")
    parser.add_argument("--usr-only", action="store_true",
                        help="USR alone (no cross-source figures), while CharacterBench's are computed")
    args = parser.parse_args()

    print(machine(), flush=True)
    replies = [r for r in load(args.dev) if r.source == "usr" or not args.usr_only]
    inputs = (n for chosen in CANDIDATES.values() for n in chosen)
    needed = tuple(dict.fromkeys((*inputs, *GROUNDING_INPUTS, *BASELINES)))
    columns = asyncio.run(features(replies, needed, args.cache))
    share = np.array([r.target for r in replies])
    groups = np.array([f"{r.source}:{r.group}" for r in replies])
    usr = np.array([r.source == "usr" for r in replies])
    print(f"\n{len(replies)} replies: {usr.sum()} USR ({len(set(groups[usr]))} contexts), {(~usr).sum()} "
          f"CharacterBench ({len(set(groups[~usr]))} characters)")
    print("\nbaselines:")
    for name in BASELINES:
        for line in file_figures(columns[name], replies, columns, args.seed):
            auc = ", AUC" + line.split(", AUC")[1] if ", AUC" in line else ""
            print(f"  {name:22} {line.split(' − ')[0]}{auc}")
    results: dict[str, dict[str, dict[str, float]]] = {}
    for label, inputs in CANDIDATES.items():
        x = np.column_stack([columns[n] for n in inputs])
        print(f"\n{label}: {', '.join(inputs)}")
        results[label] = {}
        if not usr.all():
            cross = cross_source(x, share, usr, args.c)
            print("  cross-source (fitted on the other source):")
            for line in file_figures(cross, replies, columns, args.seed):
                print(f"    {line}")
            results[label]["cross"] = ratings_rho([cross], replies)
        within = cross_validate(x, share, groups, args.c, args.repeats, args.seed)
        print(f"  within (5-fold CV by context / character, {args.repeats} repeats; the first):")
        for line in file_figures(within[0], replies, columns, args.seed):
            print(f"    {line}")
        results[label]["within"] = ratings_rho(within, replies)
    chosen = choose(results)
    print(f"\nmean ρ over {', '.join(next(iter(results.values()))['within'])} (chosen: of the sets that keep "
          f"USR ≥ {USR_FLOOR['usr_knowledge']} / {USR_FLOOR['usr_overall']}, the highest cross-source mean):")
    for label, figures in results.items():
        print(f"  {'*' if label == chosen else ' '} {label:58} " + "  ".join(
            f"{kind} {np.mean(list(rhos.values())):+.3f}" for kind, rhos in figures.items()))
    print(f"\nload average at end {load_average()}")
    if chosen is None:
        print("no input set keeps USR at its floor when fitted on these sources: nothing to write")
        return
    within = results[chosen]["within"]
    entry = _entry(CANDIDATES[chosen], columns, share, args.c,
                   f"{usr.sum()} USR + {(~usr).sum()} CharacterBench attribute replies of judge-dev, "
                   f"engine readings of {scoring_model()}, C={args.c}: python bench/fit_evidence.py --write; "
                   "cross-validated ρ " + ", ".join(f"{name} {rho:.3f}" for name, rho in within.items()))
    knowledge = np.array([r.knowledge for r in replies if r.source == "usr"])
    grounding = _entry(GROUNDING_INPUTS, {n: v[usr] for n, v in columns.items()}, knowledge, args.c,
                       f"{usr.sum()} replies of judge-dev usr_knowledge (its rating alone), C={args.c}: "
                       "python bench/fit_evidence.py --write")
    print("chosen model:", json.dumps(entry))
    if args.write:
        path = PACKAGE / EVIDENCE_FILE
        header = "".join(line for line in path.read_text(encoding="utf-8").splitlines(keepends=True)
                         if line.startswith("#"))
        body = {"version": 1, "models": {"Persona Consistency": entry}, "grounding": grounding}
        path.write_text(header + yaml.safe_dump(body, sort_keys=False, width=100), encoding="utf-8")
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
