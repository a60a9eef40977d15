"""bench/fit_evidence.py: each source's target, folds that hold whole groups out, and cross-source scores
from a model that never saw the source."""

from __future__ import annotations

import json

import numpy as np

from bench.fit_evidence import choose, cross_source, cross_validate, load


def _write(path, rows) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def test_each_source_targets_the_share_of_its_own_scale(tmp_path) -> None:
    usr = {"persona": "i ride horses.", "question": "User1: hi\nUser2: hello", "response": "i ride a lot",
           "criterion": "persona_consistency"}
    _write(tmp_path / "usr_knowledge.jsonl", [{**usr, "id": "c1-0", "human": [1, 0, 1], "scale": [0, 1]}])
    _write(tmp_path / "usr_overall.jsonl", [{**usr, "id": "c1-0", "human": [5, 3, 4], "scale": [1, 5]}])
    cb = {"persona": "Bai, a princess.", "question": "User1: who are you?",
          "criterion": "persona_consistency", "scale": [1, 4]}
    _write(tmp_path / "characterbench_attribute_consistency_bot.jsonl",
           [{**cb, "id": "b1", "response": "a princess", "human": [4]},
            {**cb, "id": "b2", "response": "a farmer", "human": [1]}])
    _write(tmp_path / "characterbench_attribute_consistency_human.jsonl",
           [{**cb, "id": "h1", "response": "hm", "human": [3]}])
    replies = load(tmp_path)
    assert [(r.source, r.item.id) for r in replies] == [("usr", "c1-0"), ("cb_bot", "b1"), ("cb_bot", "b2"),
                                                        ("cb_human", "h1")]
    assert np.allclose([r.target for r in replies], [(2 / 3 + 3 / 4) / 2, 1.0, 0.0, 2 / 3])
    assert replies[0].group == "c1" and replies[1].group == replies[2].group  # a character is one group


def test_a_group_is_scored_by_a_model_that_never_saw_its_ratings() -> None:
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


def test_a_source_is_scored_cross_source_by_a_model_fitted_on_the_other_only() -> None:
    rng = np.random.default_rng(1)
    x, share = rng.normal(size=(40, 2)), rng.uniform(0.05, 0.95, 40)
    first = np.arange(40) < 15
    before = cross_source(x, share, first, c=1.0)
    changed = share.copy()
    changed[first] = 1 - changed[first]
    after = cross_source(x, changed, first, c=1.0)
    assert np.allclose(before[first], after[first])  # its own ratings never reach its predictions
    assert not np.allclose(before[~first], after[~first])


def test_the_chosen_inputs_carry_to_the_other_source_and_keep_usr_at_its_floor() -> None:
    usr = {"usr_knowledge": 0.85, "usr_overall": 0.65}
    results = {
        "fits each source": {"cross": {"usr_overall": 0.1, "cb_bot": 0.0},
                             "within": {**usr, "cb_bot": 0.8}},
        "carries": {"cross": {"usr_overall": 0.5, "cb_bot": 0.4}, "within": {**usr, "cb_bot": 0.5}},
        "carries further, loses usr": {"cross": {"usr_overall": 0.6, "cb_bot": 0.6},
                                       "within": {**usr, "usr_knowledge": 0.7, "cb_bot": 0.6}},
    }
    assert choose(results) == "carries"
    assert choose({k: {"within": v["within"]} for k, v in results.items()}) == "fits each source"
    assert choose({"carries further, loses usr": results["carries further, loses usr"]}) is None


def test_the_cache_keeps_the_engines_readings_and_a_refit_computes_nothing(tmp_path, monkeypatch,
                                                                           capsys) -> None:
    import asyncio

    from bench import fit_evidence

    monkeypatch.setenv("PERSONAGRAPH_LIKELIHOOD_MODEL", "test")
    usr = {"persona": "i ride horses. i live in texas.", "question": "User1: hi\nUser2: hello\nUser1: pets?",
           "criterion": "persona_consistency"}
    rows = [{**usr, "id": f"c1-{k}", "response": r} for k, r in enumerate(("i ride my horse", "i like cars"))]
    _write(tmp_path / "usr_knowledge.jsonl", [{**r, "human": [1, 0, 1], "scale": [0, 1]} for r in rows])
    _write(tmp_path / "usr_overall.jsonl", [{**r, "human": [5, 3, 4], "scale": [1, 5]} for r in rows])
    for name in fit_evidence.CB_FILES:
        _write(tmp_path / name, [{"id": name, "persona": "Bai, a princess.", "question": "User1: who?",
                                  "response": "a princess", "criterion": "persona_consistency",
                                  "scale": [1, 4], "human": [4]}])
    replies = load(tmp_path)
    names = ("persona_pmi", "character_fit", "length")
    first = asyncio.run(fit_evidence.features(replies, names, tmp_path / "cache"))
    store = tmp_path / "cache" / "logprobs-test.jsonl"
    stored = [json.loads(line) for line in store.read_text().splitlines()]
    assert all(len(row["logprobs"]) == 3 and row["character_fit"] == 0.5 for row in stored)
    assert first["persona_pmi"][0] > first["persona_pmi"][1]  # "horse" is in the persona
    capsys.readouterr()
    again = asyncio.run(fit_evidence.features(replies, (*names, "response_loglik"), tmp_path / "cache"))
    assert "computed" not in capsys.readouterr().out  # a new reading of the cached log-probabilities
    assert np.allclose(again["persona_pmi"], first["persona_pmi"])
