"""bench/_harness.py: a finished run's calls come back as the chat bodies the replay benches send."""

from pathlib import Path

import pytest

from bench._harness import cpu, machine, stored_bodies
from personagraph.store import CallRow, RunStore

JUDGE = "local:qwen2.5-coder-1.5b"


def _call(store: RunStore, key: str, role: str, model: str, content: str) -> None:
    request = {"messages": [{"role": "user", "content": content}],
               "params": {"temperature": 0.0, "max_tokens": 200, "logprobs": True, "top_logprobs": 10}}
    store.put_call(CallRow(key, role, model, '{"q1": "no"}', 10, 5, 0.1), request)


def test_a_models_calls_come_back_as_chat_bodies_in_order_with_their_roles(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    _call(store, "a", "question_gen", JUDGE, "first")
    _call(store, "b", "persona", "local:qwen2.5-coder-0.5b", "the agent's")
    _call(store, "c", "judge", JUDGE, "second")
    store.close()
    bodies = stored_bodies(tmp_path, JUDGE)
    assert [(role, b["messages"][0]["content"]) for role, b in bodies] == [
        ("question_gen", "first"), ("judge", "second")]
    assert bodies[0][1]["top_logprobs"] == 10 and bodies[0][1]["max_tokens"] == 200


def test_a_folder_without_a_store_or_without_the_models_calls_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="not a run directory"):
        stored_bodies(tmp_path / "missing", JUDGE)
    store = RunStore(tmp_path)
    _call(store, "b", "persona", "local:qwen2.5-coder-0.5b", "the agent's")
    store.close()
    with pytest.raises(SystemExit, match=f"no calls to {JUDGE}"):
        stored_bodies(tmp_path, JUDGE)


def test_the_cpu_line_carries_no_load_and_the_machine_line_adds_the_load_now() -> None:
    """A figure's closing line names the CPU beside its own start → end loads: a load labelled "at start"
    but read at the end would misdate it."""
    assert "load" not in cpu() and "AVX-512" in cpu()
    assert machine().startswith(f"machine: {cpu()}, load average ") and machine().endswith("(at start)")
