"""Repeated samples (``eval --samples K``): every question answered K times per agent with distinct seeds,
cached like every item; the CI resamples questions and samples; pass^k and the per-question spread."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from personagraph.agents.persona import sample_seed
from personagraph.judges.scoring import pass_k
from personagraph.judges.stats import hierarchical_bootstrap_ci, independent_bootstrap_ci, mean_of_means
from personagraph.models import Completion
from personagraph.models.testing import register_script, value_for
from personagraph.report.html import build_report
from personagraph.report.load import load_run
from personagraph.runs.eval import EvalConfig
from personagraph.runs.eval import run as run_eval
from personagraph.schemas import Persona, short_id
from personagraph.store import RunStore

COWBOY = Persona(description="A 70-year-old retired cowboy from Texas")
IN_CHARACTER = "Yep, partner, I'd saddle up at dawn."
BROKE = "As an AI language model, I don't have personal experiences."


class Moody:
    """A test agent with seeded randomness whose first answer to a question holds the persona and whose
    later answers break it half the time: the failure mode that one sample per question never shows."""

    name = "moody"

    def __init__(self, seed: int = 7) -> None:
        self.seed = seed
        self.asked: Counter[str] = Counter()

    async def respond(self, persona: str, messages: list[dict[str, str]]) -> Completion:
        question = messages[-1]["content"]
        n = self.asked[question]
        self.asked[question] += 1
        broke = n > 0 and random.Random(f"{self.seed}:{question}:{n}").random() < 0.5
        return Completion("ok", BROKE if broke else IN_CHARACTER)


def _fair(messages: list[dict[str, Any]], schema: dict[str, Any] | None) -> str:
    """5 for the in-character answer, 1 otherwise."""
    if schema is None:
        return "ok"
    reply = value_for(schema, random.Random(0), schema, messages)
    reply["score"] = 5 if IN_CHARACTER in "\n".join(str(m.get("content", "")) for m in messages) else 1
    return json.dumps(reply)


register_script("samples-fair", _fair)


def config(**overrides: Any) -> EvalConfig:
    base = dict(personas=[COWBOY], models=["test:seeded"], judges=["test:j1"], generator="test:gen",
                environments=2, questions_per_task=2, judge_protocol="rationale", samples=3)
    return EvalConfig(**{**base, **overrides})


def _width(ci: list[float] | None) -> float:
    assert ci is not None
    return ci[1] - ci[0]


async def test_every_question_is_answered_k_times_with_distinct_seeds_and_resumes(run_dir: Path) -> None:
    summary = await run_eval(config(), run_dir)
    store = RunStore(run_dir)
    questions = store.records("question")
    answers = store.records("answer")
    assert Counter(a["sample"] for a in answers) == {0: len(questions), 1: len(questions), 2: len(questions)}
    # sample 0 keeps the answer ids (and the calls their cache keys) of runs without samples
    first = {a["question_id"]: a["id"] for a in answers if a["sample"] == 0}
    assert all(first[q["id"]] == short_id(q["id"], "test:seeded") for q in questions)
    assert summary.roles["persona"]["calls"] == 3 * len(questions)  # a seed per sample: no cache hit
    assert len({sample_seed(0, k) for k in range(3)}) == 3 and sample_seed(0, 0) == 0
    texts = {}
    for a in answers:
        texts.setdefault(a["question_id"], set()).add(a["text"])
    assert any(len(t) > 1 for t in texts.values())  # the seeds change the answers
    result = summary.models["test:seeded"]
    sampled = result["samples"]
    assert sampled["k"] == 3 and sampled["pass_threshold"] == 4
    assert sampled["pass_k_n"] == len(questions) and 0 <= sampled["pass_k"] <= 1
    assert sampled["sample_sd"] > 0
    assert len(sampled["questions"]) == len(questions)
    assert all(len(q["scores"]) == 3 for q in sampled["questions"])
    for task in result["tasks"].values():
        assert task["pass_k"] is not None and task["sample_sd"] is not None and task["n"] == 3 * 2
    means = [np.mean(q["scores"]) for q in sampled["questions"]]
    assert result["persona_score"] == pytest.approx(np.mean([t["mean"] for t in result["tasks"].values()]))
    assert np.mean(means) == pytest.approx(result["persona_score"])  # two questions per task: the same mean
    assert json.loads((run_dir / "summary.json").read_text())["models"]["test:seeded"]["samples"]["k"] == 3
    # the report plots the spread
    page = build_report([load_run(run_dir)])
    assert "Spread of each question" in page
    assert "pass^3" in page
    # cached like every item: the same command makes 0 calls; one sample on the same run dir too
    assert (await run_eval(config(), run_dir)).llm_calls == 0
    one = await run_eval(config(samples=1), run_dir)
    assert one.llm_calls == 0 and "samples" not in one.models["test:seeded"]


async def test_samples_reveal_what_one_sample_hides_wider_ci_and_pass_k(tmp_path: Path) -> None:
    """The done-when case: an agent whose failures show only across samples. With one sample per question
    every answer holds the persona (the CI has no width); with three, its breaks widen the CI and pass^3
    falls below pass^1. (When the first sample is typical, more samples narrow the CI instead.)"""
    options = dict(models=["moody"], judges=["test:samples-fair"])
    once = await run_eval(config(samples=1, **options), tmp_path / "one", agents=[Moody()])
    thrice = await run_eval(config(samples=3, **options), tmp_path / "three", agents=[Moody()])
    one, three = once.models["moody"], thrice.models["moody"]
    assert _width(three["ci"]) > _width(one["ci"])
    assert three["samples"]["pass_k"] < 1
    assert all(task["pass_k"] is not None for task in three["tasks"].values())
    # resume: 0 calls (a fresh agent object, so nothing it remembers helps)
    again = Moody()
    assert (await run_eval(config(samples=3, **options), tmp_path / "three", agents=[again])).llm_calls == 0
    assert not again.asked


def test_hierarchical_bootstrap_with_one_sample_is_the_stratified_bootstrap() -> None:
    rng = np.random.default_rng(3)
    strata = [list(rng.normal(3, 1, 8)) for _ in range(5)]
    low, high = hierarchical_bootstrap_ci([[[v] for v in s] for s in strata], seed=1)
    ref_low, ref_high = independent_bootstrap_ci(strata, mean_of_means, seed=1, method="percentile")
    assert low == pytest.approx(ref_low, abs=0.05) and high == pytest.approx(ref_high, abs=0.05)
    assert hierarchical_bootstrap_ci([[[v] for v in s] for s in strata], seed=1) == (low, high)


def test_hierarchical_bootstrap_sees_variance_within_questions_only() -> None:
    same = [[[1.0, 5.0], [1.0, 5.0]] for _ in range(3)]  # every question alike; its samples differ
    low, high = hierarchical_bootstrap_ci(same)
    assert low < 3 < high
    assert hierarchical_bootstrap_ci([[[4.0, 4.0], [4.0]]]) == (4.0, 4.0)
    assert all(np.isnan(hierarchical_bootstrap_ci([[[2.0]]])))
    assert all(np.isnan(hierarchical_bootstrap_ci([[[2.0, 3.0]], []])))


def test_pass_k_counts_questions_whose_every_sample_passes() -> None:
    assert pass_k([[4, 5, 4], [5, 5, 3], [4.5, 4, 4]], 3, 4) == (2 / 3, 3)
    assert pass_k([[5, 5], [5, 5, 5]], 3, 4) == (1.0, 1)  # a question missing a scored sample is undecided
    assert pass_k([], 3, 4) == (None, 0)
