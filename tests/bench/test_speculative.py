"""bench/speculative.py reads the 1.5B's calls of a run, as they were sent, from the run's own store."""

from pathlib import Path

import pytest

from bench.speculative import TARGET, stored_requests
from personagraph.store import CallRow, RunStore


def _call(store: RunStore, key: str, model: str, content: str) -> None:
    request = {"messages": [{"role": "user", "content": content}],
               "params": {"temperature": 0.0, "max_tokens": 200, "logprobs": True, "top_logprobs": 10}}
    store.put_call(CallRow(key, "judge", model, '{"q1": "no"}', 10, 5, 0.1), request)


def test_the_targets_calls_come_back_as_chat_bodies_in_order(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    _call(store, "a", f"local:{TARGET}", "first")
    _call(store, "b", "local:qwen2.5-coder-0.5b", "the agent's")
    _call(store, "c", f"local:{TARGET}", "second")
    store.close()
    bodies = stored_requests(tmp_path)
    assert [b["messages"][0]["content"] for b in bodies] == ["first", "second"]
    assert bodies[0]["top_logprobs"] == 10 and bodies[0]["max_tokens"] == 200


def test_a_folder_without_a_store_or_without_the_targets_calls_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="not a run directory"):
        stored_requests(tmp_path / "missing")
    store = RunStore(tmp_path)
    _call(store, "b", "local:qwen2.5-coder-0.5b", "the agent's")
    store.close()
    with pytest.raises(SystemExit, match=f"no calls to local:{TARGET}"):
        stored_requests(tmp_path)
