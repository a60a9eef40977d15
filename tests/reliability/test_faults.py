"""20% injected faults of every kind: nothing lost, no error text scored, Retry-After respected."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from bench.fake_openai import FakeOpenAI, start_in_thread
from personagraph.runs.eval import EvalConfig
from personagraph.runs.eval import run as run_eval
from personagraph.models import ModelSettings, openai_http
from personagraph.models.retry import TransientModelError
from personagraph.schemas import TASK_NAMES, Persona
from personagraph.store import RunStore

RETRY_AFTER = 0.4
FAULT_WORDS = ("injected", "rate_limit", "server_error", "rate limited", "HTTP 4", "HTTP 5", "Traceback")


class RecordingServer(FakeOpenAI):
    """The fake server, also noting when each attempt of each request body arrived and its fault."""

    def __init__(self, **options) -> None:
        super().__init__(**options)
        self.arrivals: list[tuple[str, int, float, str | None]] = []

    def _draw_fault(self, key: str, attempt: int, structured: bool):  # noqa: ANN202
        fault = super()._draw_fault(key, attempt, structured)
        self.arrivals.append((key, attempt, time.monotonic(), fault))
        return fault


def _start(**options):  # noqa: ANN202
    import asyncio
    import threading

    from bench.fake_openai import ThreadedFakeOpenAI

    server = RecordingServer(**options)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(server.start(), loop).result(timeout=10)
    return ThreadedFakeOpenAI(server, loop, thread)


PERSONAS = [Persona(description=d) for d in (
    "A 70-year-old retired cowboy from Texas", "A 36-year-old environmental lawyer from Sydney",
    "A 19-year-old competitive chess player from Chennai", "A 52-year-old night-shift nurse from Glasgow")]


def test_faults_of_every_kind_lose_nothing_and_score_no_error(run_dir: Path) -> None:
    handle = _start(delay=0.01, rate_429=0.04, rate_500=0.04, rate_timeout=0.04, rate_drop=0.04,
                    rate_malformed=0.04, retry_after=RETRY_AFTER, timeout_sleep=3.0, seed=1)
    try:
        # judged the rationale way, exemplars too: every kind of call, enough draws for every fault
        config = EvalConfig(personas=PERSONAS, models=["openai:agent"], judges=["openai:judge"],
                           generator="openai:gen", environments=2, questions_per_task=1, concurrency=16,
                           judge_protocol="rationale")
        settings = ModelSettings(base_url=handle.base_url, api_key="sk-test", timeout_s=1.0)
        import asyncio

        summary = asyncio.run(run_eval(config, run_dir, settings=settings))
        server: RecordingServer = handle.server  # type: ignore[assignment]
        stats = handle.stats()
    finally:
        handle.stop()
    assert all(stats.faults[kind] > 0 for kind in ("429", "500", "timeout", "drop", "malformed")), stats.faults

    store = RunStore(run_dir, readonly=True)
    # 0 lost: every persona ran to the end, finished or with its failed items listed; every selection,
    # task, question, answer and verdict accounted for
    done, failed = store.records("unit_done"), store.records("unit_failed")
    assert summary.incomplete == 0 and {r["persona_id"] for r in done + failed} == {p.id for p in PERSONAS}
    assert summary.personas_finished == len(done) and bool(failed) == bool(summary.failures)
    selections = store.records("selection")
    assert len(selections) == len(PERSONAS)
    errors = [b for b in store.records("question_batch") if b["status"] != "ok"]
    questions = store.records("question")
    for selection in selections:
        pid = selection["persona_id"]
        if selection["status"] != "ok":
            assert selection["error"], selection
            continue
        for task in TASK_NAMES:
            asked = [q for q in questions if q["persona_id"] == pid and q["task"] == task]
            failed = [e for e in errors if e["task"] == task and e["persona_id"] == pid]
            assert asked or failed, (pid, task)
    answers = {a["question_id"]: a for a in store.records("answer")}
    verdicts = {v["answer_id"]: v for v in store.records("verdict")}
    assert set(answers) == {q["id"] for q in questions}
    for answer in answers.values():
        if answer["status"] == "ok":
            assert answer["text"] and not any(word in answer["text"] for word in FAULT_WORDS)
            verdict = verdicts[answer["id"]]  # every ok answer has its verdict: scored or failed
            if verdict["status"] == "ok":
                assert 1 <= verdict["score"] <= 5 and verdict["rationale"]
            else:
                assert verdict["score"] is None and verdict["error"]
        else:
            assert answer["error"] and answer["id"] not in verdicts
    scored = [v for v in verdicts.values() if v["status"] == "ok"]
    assert len(scored) >= 0.8 * len(answers)
    # 0 error texts scored: no stored reply (the response cache) is an error message
    db = store._db
    for (text,) in db.execute("SELECT text FROM calls"):
        assert not any(word in text for word in FAULT_WORDS), text[:200]
    # retries respect Retry-After: the next attempt of a body that got a 429 came at least that late
    by_key: dict[str, list[tuple[int, float, str | None]]] = {}
    for key, attempt, at, fault in server.arrivals:
        by_key.setdefault(key, []).append((attempt, at, fault))
    gaps = []
    for attempts in by_key.values():
        attempts.sort()
        for (_, at, fault), (_, next_at, _) in zip(attempts, attempts[1:]):
            if fault == "429":
                gaps.append(next_at - at)
    assert gaps and min(gaps) >= RETRY_AFTER, sorted(gaps)[:5]


async def test_http_errors_are_classified_and_the_key_stays_out_of_errors() -> None:
    handle = start_in_thread(rate_429=1.0, retry_after=2.5)
    try:
        with pytest.raises(TransientModelError) as caught:
            await openai_http.chat_completion(handle.base_url, "sk-secret-in-header",
                                              {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
                                              timeout_s=5)
        assert caught.value.retry_after == 2.5 and "sk-secret" not in str(caught.value)
        with pytest.raises(openai_http.PermanentModelError, match="HTTP 400"):
            await openai_http.chat_completion(handle.base_url, "k", {"model": "m", "messages": []}, timeout_s=5)
        with pytest.raises(TransientModelError, match="ClientConnectorError|Connect"):
            await openai_http.chat_completion("http://127.0.0.1:9/v1", "k", {"model": "m", "messages": []},
                                              timeout_s=5)
    finally:
        await openai_http.close_sessions()
        handle.stop()
