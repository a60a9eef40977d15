"""The cross-user protocol of bench/madial_retrieval.py: settings are chosen on the tuning fold only."""

from __future__ import annotations

import numpy as np

from bench.madial_retrieval import TEMPERATURES, Query, cross_user, grid, reciprocal_ranks, select
from personagraph.memory.bank import Memory
from personagraph.memory.recall import VIEWS, Candidates, RecallSettings

N_CANDIDATES = 12


def query(user: str, rng: np.random.Generator, cue: str) -> Query:
    """Random components; the relevant memory (id 0) stands out in the ``cue`` component only."""
    memories = [Memory(id=str(i), user_id=user, event=f"event {i}") for i in range(N_CANDIDATES)]
    names = [f"dense.{v}" for v in VIEWS] + ["bm25", "emotion"]
    components = {name: rng.normal(size=N_CANDIDATES) for name in names}
    components[cue][0] += 4.0
    cands = Candidates(memories=memories, embeddings=np.zeros((N_CANDIDATES, 2)), components=components)
    return Query(user_id=user, relevant_ids=["0"], by_temperature={t: cands for t in {*TEMPERATURES, 0.1}})


def relabel(q: Query, relevant: str) -> Query:
    return Query(user_id=q.user_id, relevant_ids=[relevant], by_temperature=q.by_temperature)


def test_settings_chosen_on_one_user_ignore_the_other_users_labels() -> None:
    rng = np.random.default_rng(0)
    queries = [query("1", rng, "bm25") for _ in range(8)] + [query("2", rng, "emotion") for _ in range(8)]
    choices = grid()[::9]  # every view set, temperature and weight still occurs
    result = cross_user(queries, choices)
    tuned_on_1 = RecallSettings.model_validate_json(result.chosen["1"])
    assert tuned_on_1.bm25_weight > 0  # user 1's relevant memories stand out in BM25

    # The held-out fold (user 2) gets other labels: the memory that is best by BM25.
    perturbed = queries[:8] + [
        relabel(q, str(int(np.argmax(q.by_temperature[0.1].components["bm25"])))) for q in queries[8:]
    ]
    again = cross_user(perturbed, choices)
    assert again.chosen["1"] == result.chosen["1"]
    assert again.chosen["2"] != result.chosen["2"]  # user 2's own choice does follow its labels
    # A selection that saw both users would have moved: the check above has teeth.
    assert select(perturbed, choices) != select(queries, choices)


def test_each_held_out_query_is_scored_with_the_other_users_frozen_settings() -> None:
    rng = np.random.default_rng(1)
    queries = [query("1", rng, "dense.user") for _ in range(5)] + [query("2", rng, "bm25") for _ in range(5)]
    choices = grid()[::37]
    result = cross_user(queries, choices)
    for tune, test in (("1", slice(5, 10)), ("2", slice(0, 5))):
        frozen = RecallSettings.model_validate_json(result.chosen[tune])
        np.testing.assert_array_equal(result.reciprocal_ranks[test], reciprocal_ranks(queries[test], frozen))
    assert not np.isnan(result.reciprocal_ranks).any()


def test_grid_covers_views_temperatures_and_weights_without_repeats() -> None:
    choices = grid()
    dumped = [c.model_dump_json() for c in choices]
    assert len(set(dumped)) == len(dumped)
    assert {c.lse_temperature for c in choices if "turns_lse" in c.fusion_views} == set(TEMPERATURES)
    assert {c.fusion_views for c in choices} >= {VIEWS, *((v,) for v in VIEWS)}
    assert any(c.bm25_weight == 0 and c.emotion_weight == 0 for c in choices)
