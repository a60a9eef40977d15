"""LongLaMP: JSONL loading, the four retrievers, the prompt, generation, failures and resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from personagraph.errors import PersonagraphError
from personagraph.metrics.longlamp import (
    LongLaMPConfig,
    load_longlamp,
    longlamp_messages,
    profile_text,
    profile_time,
    retrieve,
)
from personagraph.models.testing import register_script
from personagraph.runs.longlamp import run as run_longlamp

PROFILE = [
    {"summary": "Solid tent", "reviewText": "Great tent, easy to pitch in the rain.", "unixReviewTime": 100},
    {"summary": "Bad boots", "reviewText": "These hiking boots fell apart on the trail.", "unixReviewTime": 50},
    {"summary": "ok", "reviewText": "The coffee maker works fine.", "unixReviewTime": 300},
]
RECORDS = [
    {"id": "a", "input": "Write a review of hiking boots.", "output": "Sturdy boots that kept my feet dry on the trail.",
     "profile": PROFILE},
    {"input": "Write an abstract for the paper 'Dense retrieval for users'.",
     "output": "We study dense retrieval of user profiles.",
     "profile": [{"title": "Dense retrieval", "abstract": "Dense retrievers embed queries."},
                 {"title": "Cooking", "abstract": "Pasta recipes for busy people."}]},
]


def write_jsonl(tmp_path: Path, records=RECORDS, name: str = "data.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_load_longlamp(tmp_path: Path) -> None:
    records = load_longlamp(write_jsonl(tmp_path))
    assert [r.id for r in records] == ["a", "2"]  # default id: the line number
    assert len(load_longlamp(write_jsonl(tmp_path), limit=1)) == 1


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"input": "x", "profile": [{"text": "t"}]}, r"line 1: missing field 'output'"),
        ({"input": "x", "output": "", "profile": [{"text": "t"}]}, r"line 1: 'output' must be a non-empty string"),
        ({"input": "x", "output": "y", "profile": []}, r"line 1: 'profile' must be a non-empty list of objects"),
        ({"input": "x", "output": "y", "profile": ["t"]}, r"'profile' must be a non-empty list of objects"),
        ({"input": "x", "output": "y", "profile": [{"id": "1"}]}, r"line 1: profile item 1 has no text field"),
    ],
)
def test_load_longlamp_bad_records(tmp_path: Path, record, message) -> None:
    with pytest.raises(PersonagraphError, match=message):
        load_longlamp(write_jsonl(tmp_path, [record]))


def test_load_longlamp_bad_files(tmp_path: Path) -> None:
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(PersonagraphError, match=r"empty.jsonl: empty file"):
        load_longlamp(tmp_path / "empty.jsonl")
    (tmp_path / "junk2.jsonl").write_text(json.dumps(RECORDS[0]) + "\nnot json\n")
    with pytest.raises(PersonagraphError, match=r"junk2.jsonl:2: invalid JSON"):
        load_longlamp(tmp_path / "junk2.jsonl")


def test_profile_fields() -> None:
    assert profile_text(PROFILE[0]) == "Solid tent\nGreat tent, easy to pitch in the rain."
    assert profile_text({"id": "7", "body": "free text", "date": "2020-01-01"}) == "free text"
    assert profile_time({"date": "2020-01-02"}) > profile_time({"date": "2020-01-01"})
    assert profile_time({"unixReviewTime": 5}) == 5.0
    assert profile_time({"reviewTime": "09 13, 2013"}) is not None
    assert profile_time({"text": "x"}) is None


def test_retrievers() -> None:
    query = "Write a review of hiking boots."
    # BM25: only item 1 shares "hiking"/"boots" with the query
    assert retrieve("bm25", query, PROFILE, 1) == [1]
    assert retrieve("dense", query, PROFILE, 1) == [1]
    # recency: newest first by unixReviewTime 300 > 100 > 50
    assert retrieve("recency", query, PROFILE, 3) == [2, 0, 1]
    # without dates the end of the list is the most recent
    undated = [{"text": "a"}, {"text": "b"}, {"text": "c"}]
    assert retrieve("recency", query, undated, 2) == [2, 1]
    # random: k distinct items, repeatable per (seed, record), varying across records
    first = retrieve("random", query, undated * 4, 3, seed=1, key="r1")
    assert len(set(first)) == 3 and first == retrieve("random", query, undated * 4, 3, seed=1, key="r1")
    assert {tuple(retrieve("random", query, undated * 4, 3, seed=1, key=f"r{i}")) for i in range(6)} != {tuple(first)}
    # k larger than the profile keeps everything
    assert sorted(retrieve("bm25", query, PROFILE, 10)) == [0, 1, 2]


def test_prompt_shows_the_retrieved_items_in_order(tmp_path: Path) -> None:
    record = load_longlamp(write_jsonl(tmp_path))[0]
    content = longlamp_messages(record, [1, 0])[1]["content"]
    assert content.index("Bad boots") < content.index("Solid tent") and "coffee" not in content
    assert content.rstrip().endswith("Write a review of hiking boots.")
    long = record.model_copy(update={"profile": [{"text": "word " * 1000}]})
    assert len(longlamp_messages(long, [0], max_item_chars=100)[1]["content"]) < 400


async def test_run_generates_scores_and_resumes(tmp_path: Path) -> None:
    config = LongLaMPConfig(data=write_jsonl(tmp_path), model="test:default", retriever="bm25", k=2)
    first = await run_longlamp(config, tmp_path / "run")
    assert (first.items, first.generated, first.llm_calls) == (2, 2, 2)
    assert first.scores.keys == ["rouge1", "rougeL", "meteor"]
    rows = [json.loads(line) for line in (tmp_path / "run" / "longlamp_test-default_bm25_k2.jsonl").read_text().splitlines()]
    assert rows[0]["retrieved"] == [1, 0] and rows[0]["generation"]
    second = await run_longlamp(config, tmp_path / "run")
    assert second.llm_calls == 0 and second.generated == 2


async def test_empty_generations_are_failures(tmp_path: Path) -> None:
    register_script("blank-writer", lambda messages, schema: "" if "boots" in messages[-1]["content"]
                    else "We study dense retrieval of user profiles.")
    config = LongLaMPConfig(data=write_jsonl(tmp_path), model="test:blank-writer", retriever="recency", k=1)
    summary = await run_longlamp(config, tmp_path / "run")
    assert summary.cost.failures == 1 and summary.cost.failure_ratio == 0.5
    assert summary.scores.failed == [True, False]
    assert summary.scores.means["rouge1"] == pytest.approx(1.0)  # mean over the successful item only
