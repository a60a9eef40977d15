"""What the embedded 1.5B sees of a contradicted persona fact on every development file, before a judge
uses it: the *fact-support* reading, and whether a gate built on it can join the Persona Consistency score.

Per reply, the model is asked with log-probabilities whether the answer agrees with facts about the
character, twice: once shown the profile sentence most related to the line answered and the answer
(MiniLM cosine), once shown no fact. ``support`` is the difference of the two P(Yes) in logits: how much
reading the fact raises the model's belief that the answer agrees (a bare P(Yes) mostly reads how plausible
the answer sounds). Printed, beside the trivial baselines:

* per file: Spearman ρ with people (USR: Uses Knowledge / Overall; CharacterBench attribute files with a
  95% CI and the paired difference to the best baseline, and the ROC AUC of the replies people scored 1,
  "contradicts the profile", against those scored 4; the behaviour file), and pairwise accuracy on
  ``bench/rubric_dev``'s hand-written contradictions (the original above its contradiction);
* a *consistency* model: a logistic model of ``support`` and the character-fit answer
  (``prompts/character_fit.yaml``) separating 1s from the rest, fitted on one attribute file and scored on
  the other;
* that model as a gate of the packaged Persona Consistency model (``judges/evidence.yaml``): score ×
  min(1, consistency / τ), τ the consistency below which a given share of USR replies falls (the share of
  ordinary replies the gate is allowed to touch), with USR and CharacterBench as they would then score.

The engine's answers are cached in ``--cache``; the packaged model's inputs and the character-fit answer
come from ``bench/fit_evidence.py``'s cache (computed there when missing).

    .venv/bin/python bench/contradiction_signals.py
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._harness import load_average, machine  # noqa: E402
from bench.fit_evidence import CACHE as EVIDENCE_CACHE  # noqa: E402
from bench.fit_evidence import DEV, Reply, against_best, features, fit, load, predict, rho_ci  # noqa: E402
from personagraph.judges.features import BASELINES, Text, compute, last_turn, sentences  # noqa: E402
from personagraph.judges.meta_eval import CriterionCatalogue, load_items, question_text  # noqa: E402
from personagraph.judges.protocols import EvidenceModel, evidence_model  # noqa: E402
from personagraph.judges.rubrics import load_rubric  # noqa: E402
from personagraph.judges.stats import independent_bootstrap_ci, spearman  # noqa: E402
from personagraph.judges.validity import roc_auc, variant_stats  # noqa: E402

RUBRIC_DEV = Path(__file__).resolve().parent / "rubric_dev" / "items.jsonl"
BEHAVIOUR = "characterbench_behavior_consistency_human.jsonl"
CACHE = Path.home() / ".cache" / "personagraph" / "bench-contradiction"
SYSTEM = "You check whether what a character says agrees with facts about the character."
WITH_FACT = ('Facts about the character:\n- {fact}\n\nSomeone said to the character: "{asked}"\n'
             'The character answered: "{answer}"\n\nDoes the answer agree with the facts? Answer Yes or No.')
WITHOUT_FACT = ('Someone said to the character: "{asked}"\nThe character answered: "{answer}"\n\n'
                'Does the answer agree with the facts about the character? Answer Yes or No.')
USR_SHARES = (0.10, 0.20)  # shares of USR replies a gate may touch


@dataclass(frozen=True)
class Record:
    """One reply the signals are read of: its file, id, text and human score (None for rubric_dev)."""

    source: str
    id: str
    text: Text
    human: float | None = None


def related_fact(t: Text) -> str:
    """The profile sentence closest (MiniLM cosine) to the line answered and the answer together."""
    from personagraph.embeddings import encode

    facts = [s for s in sentences(t.persona) if len(s) > 3] or [t.persona]
    vectors = encode([*facts, f"{last_turn(t.question)} {t.response}"])
    return facts[int(np.argmax(vectors[:-1] @ vectors[-1]))]


def questions(t: Text) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """The two chat questions of one reply: with its related fact, and without any."""
    asked, answer = last_turn(t.question), t.response.strip()
    return ([{"role": "system", "content": SYSTEM},
             {"role": "user", "content": WITH_FACT.format(fact=related_fact(t), asked=asked, answer=answer)}],
            [{"role": "system", "content": SYSTEM},
             {"role": "user", "content": WITHOUT_FACT.format(asked=asked, answer=answer)}])


def logit(p: np.ndarray) -> np.ndarray:
    p = np.clip(np.asarray(p, dtype=float), 1e-4, 1 - 1e-4)
    return np.log(p / (1 - p))


async def support(records: list[Record], cache: Path, in_flight: int = 8) -> np.ndarray:
    """Per record, logit P(Yes | related fact) − logit P(Yes | no fact), the answers cached by question."""
    from personagraph.likelihood import scoring_model, yes_probability
    from personagraph.models.openai_http import close_sessions

    cache.mkdir(parents=True, exist_ok=True)
    store = cache / f"answers-{scoring_model()}.jsonl"
    known: dict[str, float] = {}
    if store.is_file():
        rows = map(json.loads, store.read_text(encoding="utf-8").splitlines())
        known = {row["key"]: row["p"] for row in rows}
    limit = asyncio.Semaphore(in_flight)

    async def ask(messages: list[dict[str, str]]) -> float:
        key = hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()
        if key not in known:
            async with limit:
                known[key] = await yes_probability(messages)
            with store.open("a", encoding="utf-8") as out:
                out.write(json.dumps({"key": key, "p": known[key]}) + "\n")
        return known[key]

    async def one(with_fact: list[dict[str, str]], without: list[dict[str, str]]) -> float:
        shown, bare = await asyncio.gather(ask(with_fact), ask(without))
        return float(logit(shown) - logit(bare))

    asked = [questions(r.text) for r in records]  # MiniLM on this thread, before the engine is asked
    try:
        return np.array(await asyncio.gather(*(one(*pair) for pair in asked)))
    finally:
        await close_sessions()


def records(dev: Path, rubric_dev: Path) -> tuple[list[Reply], list[Record]]:
    """fit_evidence's graded replies (USR, CharacterBench attribute files), then the behaviour file's and
    rubric_dev's originals (``<id>``) and contradictions (``<id>-c``)."""
    graded = load(dev)
    out = [Record(r.source, r.item.id, Text(r.item.persona, question_text(r.item), r.item.response),
                  r.human) for r in graded]
    out += [Record("cb_behavior", i.id, Text(i.persona, question_text(i), i.response), i.human_mean)
            for i in load_items(dev / BEHAVIOUR, CriterionCatalogue())]
    for row in map(json.loads, rubric_dev.read_text(encoding="utf-8").splitlines()):
        for suffix, response in (("", row["response"]), ("-c", row["contradiction"])):
            text = Text(row["persona"], row["question"], response)
            out.append(Record("rubric_dev", row["id"] + suffix, text))
    return graded, out


def versus_baselines(score: np.ndarray, human: np.ndarray, baselines: dict[str, np.ndarray]) -> str:
    """ρ [CI], and its paired difference to the best baseline's ρ."""
    best, d = against_best(score, baselines, human, seed=0)
    rho, low, high = rho_ci(score, human, seed=0)
    return (f"ρ {rho:+.3f} [{low:+.3f}, {high:+.3f}]; − {best} ({spearman(baselines[best], human):+.3f})"
            f" {d.value:+.3f} [{d.ci_low:+.3f}, {d.ci_high:+.3f}]")


def not_contradicting(x: np.ndarray, human: np.ndarray, scored: np.ndarray) -> np.ndarray:
    """P(scored above 1) of the ``scored`` rows, from fit_evidence's logistic model fitted on ``x``."""
    return predict(fit(x, (human > 1).astype(float), c=1.0), scored)


def pairwise(score: dict[str, float]) -> str:
    """Pairwise accuracy [95% CI] of rubric_dev's originals (``<id>``) above their contradictions
    (``<id>-c``), ties half."""
    originals = sorted(i for i in score if not i.endswith("-c"))
    contradictions = [score[f"{i}-c"] for i in originals]
    stats = variant_stats("contradiction", [score[i] for i in originals], contradictions)
    acc = stats.pairwise_accuracy
    return f"{acc.value:.2f} [{acc.ci_low:.2f}, {acc.ci_high:.2f}]"


def auc(score: np.ndarray, human: np.ndarray) -> str:
    """ROC AUC of the replies people scored 4 above those scored 1, with a 95% CI (each group
    resampled within itself)."""
    fours, ones = score[human == 4], score[human == 1]
    low, high = independent_bootstrap_ci((fours, ones), roc_auc, n_resamples=1000, method="percentile")
    return f"{roc_auc(fours, ones):.3f} [{low:.3f}, {high:.3f}]"


def quartiles(values: np.ndarray) -> str:
    return " ".join(f"{q:.2f}" for q in np.percentile(values, [25, 50, 75]))


def baselines_by_id(recs: list[Record]) -> dict[str, dict[str, float]]:
    """Every trivial baseline of every record: name → record id → value."""
    columns = compute(BASELINES, [r.text for r in recs])
    return {name: {r.id: v for r, v in zip(recs, column, strict=True)} for name, column in columns.items()}


def report(label: str, signal: dict[str, float], recs: list[Record], graded: list[Reply],
           base: dict[str, dict[str, float]]) -> None:
    """Prints a per-reply reading on every dev file beside the baselines ``base`` (name → id → value): ρ
    with people and the paired difference to the best baseline, USR's Uses Knowledge ρ, the attribute files'
    AUC of 1s against 4s, and rubric_dev's pairwise accuracy."""
    print(f"\n{label}:")
    for source in ("usr", "cb_bot", "cb_human", "cb_behavior"):
        rows = [r for r in recs if r.source == source]
        s, h = np.array([signal[r.id] for r in rows]), np.array([r.human for r in rows])
        b = {name: np.array([base[name][r.id] for r in rows]) for name in BASELINES}
        if source == "usr":
            knowledge = np.array([g.knowledge for g in graded if g.source == "usr"])
            print(f"  usr ({len(rows)}): Uses Knowledge ρ {spearman(s, knowledge):+.3f}, "
                  f"Overall {versus_baselines(s, h, b)}")
            continue
        line = f"  {source} ({len(rows)}): {versus_baselines(s, h, b)}"
        if source != "cb_behavior":
            overlap = b["word_overlap"]
            line += f"; AUC 1 vs 4 {auc(s, h)} (word overlap {auc(overlap, h)})"
        print(line)
    pairs = [r.id for r in recs if r.source == "rubric_dev"]
    print(f"  rubric_dev ({len(pairs) // 2} pairs): pairwise {pairwise({i: signal[i] for i in pairs})} "
          f"(word overlap {pairwise({i: base['word_overlap'][i] for i in pairs})})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dev", type=Path, default=DEV)
    parser.add_argument("--rubric-dev", type=Path, default=RUBRIC_DEV)
    parser.add_argument("--cache", type=Path, default=CACHE)
    args = parser.parse_args()
    print(machine(), flush=True)

    graded, recs = records(args.dev, args.rubric_dev)
    values = asyncio.run(support(recs, args.cache))
    signal = {r.id: v for r, v in zip(recs, values, strict=True)}
    base = baselines_by_id(recs)

    report("fact support (logit P(Yes | related fact) − logit P(Yes | no fact))", signal, recs, graded, base)

    columns = asyncio.run(features(graded, ("character_fit", *_packaged().features), EVIDENCE_CACHE))
    src = np.array([g.source for g in graded])
    human = np.array([g.human for g in graded])
    x = np.column_stack([[signal[g.item.id] for g in graded], columns["character_fit"]])
    bot, hum, usr = src == "cb_bot", src == "cb_human", src == "usr"
    consistency = np.zeros(len(graded))
    for train, test in ((bot, hum), (hum, bot)):
        consistency[test] = not_contradicting(x[train], human[train], x[test])
    consistency[usr] = not_contradicting(x[bot | hum], human[bot | hum], x[usr])
    print("\nconsistency model (support, character fit), fitted on one attribute file, scored on the other:")
    for name, rows in (("cb_bot", bot), ("cb_human", hum)):
        c, h = consistency[rows], human[rows]
        print(f"  {name}: ρ {spearman(c, h):+.3f}, AUC 1 vs 4 {auc(c, h)}")
    print(f"  its quartiles on USR (fitted on both attribute files): {quartiles(consistency[usr])}; on the "
          f"attribute files' 1s: {quartiles(consistency[~usr & (human == 1)])}")

    model = _packaged()
    packaged = np.array([model.share({n: columns[n][k] for n in model.features})
                         for k in range(len(graded))])
    knowledge = np.array([g.knowledge if g.knowledge is not None else np.nan for g in graded])
    print("\nPersona Consistency's packaged model × min(1, consistency / τ) (USR in-sample: the model was "
          "fitted there):")
    for share in (0.0, *USR_SHARES):
        tau = float(np.quantile(consistency[usr], share)) if share else 0.0
        score = packaged * (np.minimum(1.0, consistency / tau) if tau else 1.0)
        parts = [f"USR ρ {spearman(score[usr], knowledge[usr]):.3f} / {spearman(score[usr], human[usr]):.3f}"]
        for name, rows in (("cb_bot", bot), ("cb_human", hum)):
            s, h = score[rows], human[rows]
            parts.append(f"{name} ρ {spearman(s, h):+.3f}, AUC {roc_auc(s[h == 4], s[h == 1]):.3f}")
        label = "no gate" if not share else f"τ touching {share:.0%} of USR ({tau:.2f})"
        print(f"  {label}: " + "; ".join(parts))
    print(f"\nload average at end {load_average()}")


def _packaged() -> EvidenceModel:
    model = evidence_model(load_rubric("persona_consistency"))
    if model is None:
        raise SystemExit("personagraph/judges/evidence.yaml holds no Persona Consistency model")
    return model


if __name__ == "__main__":
    main()
