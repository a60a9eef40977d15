"""bench/slots.py sends a run's calls in the waves the graph sent: one role's consecutive calls at once."""

from bench.slots import waves


def test_consecutive_calls_of_one_role_form_one_wave() -> None:
    calls = [("env_selector", {"n": 0}), *(("question_gen", {"n": i}) for i in range(1, 6)),
             ("judge", {"n": 6}), ("judge", {"n": 7})]
    assert [(role, [b["n"] for b in bodies]) for role, bodies in waves(calls)] == [
        ("env_selector", [0]), ("question_gen", [1, 2, 3, 4, 5]), ("judge", [6, 7])]
