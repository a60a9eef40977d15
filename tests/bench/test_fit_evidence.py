"""bench/fit_evidence.py: the target's balance of the two ratings, and folds that hold whole contexts out."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from bench import fit_evidence
from bench.fit_evidence import cross_validate, target


def test_the_target_weighs_uses_knowledge_as_told_and_averages_by_default() -> None:
    knowledge, overall = np.array([0.0, 1.0, 1 / 3]), np.array([5.0, 1.0, 3.0])
    assert np.allclose(target(knowledge, overall), [0.5, 0.5, (1 / 3 + 0.5) / 2])
    assert np.allclose(target(knowledge, overall, 1.0), knowledge)
    assert np.allclose(target(knowledge, overall, 0.0), (overall - 1) / 4)
    assert np.allclose(target(knowledge, overall, 0.7), 0.7 * knowledge + 0.3 * (overall - 1) / 4)


def test_a_context_is_scored_by_a_model_that_never_saw_its_ratings() -> None:
    rng = np.random.default_rng(0)
    groups = np.repeat([f"ctx{i}" for i in range(10)], 5)
    x, share = rng.normal(size=(50, 3)), rng.uniform(0.05, 0.95, 50)
    before = cross_validate(x, share, groups, c=1.0, repeats=2, seed=0)
    changed = share.copy()
    changed[groups == "ctx3"] = 1 - changed[groups == "ctx3"]  # its ratings turned upside down
    after = cross_validate(x, changed, groups, c=1.0, repeats=2, seed=0)
    for b, a in zip(before, after, strict=True):
        assert np.allclose(b[groups == "ctx3"], a[groups == "ctx3"])  # its own predictions do not move
        assert not np.allclose(b[groups != "ctx3"], a[groups != "ctx3"])  # the others' models did learn it


def test_a_knowledge_weight_outside_zero_to_one_is_one_line_before_any_work(monkeypatch, capsys) -> None:
    monkeypatch.setattr(sys, "argv", ["fit_evidence.py", "--knowledge-weight", "1.5"])
    monkeypatch.setattr(fit_evidence, "load_dev", lambda _: pytest.fail("read the data before the check"))
    with pytest.raises(SystemExit) as exited:
        fit_evidence.main()
    assert exited.value.code == 2
    assert "--knowledge-weight 1.5: must be within [0, 1]" in capsys.readouterr().err
