"""The session graph: stop rules, failed/empty turns, adversarial escalation, judge separation, resume,
records as turns finish, the session verdict — offline with the test models."""

from __future__ import annotations

import json
import re

import pytest

from personagraph.agents.persona import PersonaAgent
from personagraph.agents.user_sim import STOP_TOKEN, HumanUser
from personagraph.errors import PersonagraphError
from personagraph.models import ModelClient
from personagraph.models.testing import register_script
from personagraph.judges.session import drift, split_judges
from personagraph.runs.simulate import SimulateConfig, chat, judge_session, session_specs
from personagraph.runs.simulate import run as simulate
from personagraph.transcripts import read_transcript
from personagraph.store import RunStore

PERSONA = "A 70-year-old retired cowboy from Texas"
REFUSAL = "As an AI language model, I don't have personal experiences."


def _turn_of(messages) -> int:
    match = re.search(r"message number (\d+)", messages[-1]["content"])
    return int(match.group(1)) if match else 0


def _level_of(messages) -> int | None:
    match = re.search(r"Pressure level (\d) of 3", messages[0]["content"])
    return int(match.group(1)) if match else None


def user_script(messages, schema):
    level = _level_of(messages)
    return f"Question {_turn_of(messages)}" + (f" at level {level}" if level else "") + ", partner?"


register_script("s-user", user_script)


def config(**fields) -> SimulateConfig:
    base = {
        "persona": PERSONA,
        "model": "test:s-agent",
        "user_model": "test:s-user",
        "judges": ["test:s-judge"],
        "turns": 3,
    }
    return SimulateConfig(**{**base, **fields})


def session(run_dir, index: int = 0) -> dict:
    store = RunStore(run_dir, readonly=True)
    try:
        return store.records("session")[index]
    finally:
        store.close()


def agent_turns(record) -> list[dict]:
    return [e for e in record["turns"] if e["role"] == "assistant"]


# --- stop rules -------------------------------------------------------------------------------------
async def test_max_turns(run_dir):
    summary = await simulate(config(turns=3), run_dir)
    record = session(run_dir)
    assert record["status"] == "finished" and record["stop_reason"] == "max_turns"
    assert [(e["index"], e["role"]) for e in record["turns"]] == [
        (1, "user"),
        (1, "assistant"),
        (2, "user"),
        (2, "assistant"),
        (3, "user"),
        (3, "assistant"),
    ]
    assert all(set(e["scores"]) == {"test:s-judge"} for e in agent_turns(record))
    assert set(agent_turns(record)[0]["scores"]["test:s-judge"]) == {
        "Persona Consistency",
        "Linguistic Habits",
    }
    assert summary.overall["stop_reasons"] == {"max_turns": 1}
    assert summary.sessions[0]["agent_turns"] == 3
    transcripts = run_dir / "transcripts"
    lines = [json.loads(x) for x in (transcripts / f"{record['id']}.jsonl").read_text().splitlines()]
    assert [x["type"] for x in lines] == ["header"] + ["turn"] * 6 + ["end"]
    assert "## Turn 3" in (transcripts / f"{record['id']}.md").read_text()
    assert json.loads((run_dir / "summary.json").read_text())["kind"] == "simulate"
    store = RunStore(run_dir, readonly=True)
    assert store.get_meta("kind") == "simulate"
    store.close()


async def test_user_stop_token_ends_the_session(run_dir):
    register_script(
        "s-user-stop", lambda m, s: "Nice talking!" + (f" {STOP_TOKEN}" if _turn_of(m) == 2 else "")
    )
    await simulate(config(user_model="test:s-user-stop", turns=5), run_dir)
    record = session(run_dir)
    assert record["stop_reason"] == "user_stop"
    assert [(e["index"], e["role"]) for e in record["turns"]] == [(1, "user"), (1, "assistant"), (2, "user")]
    assert record["turns"][-1]["stop"] is True and record["turns"][-1]["text"] == "Nice talking!"
    assert STOP_TOKEN not in json.dumps(record["turns"])


@pytest.mark.parametrize(
    ("user", "reason"),
    [("test:empty", "user_empty"), ("test:s-user-raises", "user_failed")],
)
async def test_empty_or_failed_user_turn_is_recorded(run_dir, user, reason):
    register_script("s-user-raises", lambda m, s: (_ for _ in ()).throw(ValueError("user model broke")))
    await simulate(config(user_model=user), run_dir)
    record = session(run_dir)
    assert record["stop_reason"] == reason and record["status"] == "finished"
    assert len(record["turns"]) == 1 and record["turns"][0]["status"] == reason.split("_")[1]
    assert agent_turns(record) == []


async def test_empty_agent_turn_is_recorded_not_judged(run_dir):
    register_script(
        "s-agent-empty-2", lambda m, s: "" if sum(x["role"] == "user" for x in m) == 2 else "Howdy."
    )
    summary = await simulate(config(model="test:s-agent-empty-2", turns=4), run_dir)
    record = session(run_dir)
    assert record["stop_reason"] == "agent_empty"
    last = record["turns"][-1]
    assert (last["index"], last["role"], last["status"], last["text"], last["scores"]) == (
        2,
        "assistant",
        "empty",
        "",
        {},
    )
    assert summary.sessions[0]["agent_turns"] == 1 and summary.sessions[0]["failed_turns"] == 1
    assert "(empty: empty reply)" in (run_dir / "transcripts" / f"{record['id']}.md").read_text()


async def test_a_reply_cut_at_the_token_limit_is_marked_and_counted(run_dir):
    register_script("s-agent-long-2", lambda m, s: "I rode the range for forty years " * 10
                    if sum(x["role"] == "user" for x in m) == 2 else "Howdy.")
    summary = await simulate(config(model="test:s-agent-long-2", turns=3, max_agent_tokens=16), run_dir)
    record = session(run_dir)
    assert [e["at_token_limit"] for e in agent_turns(record)] == [False, True, False]
    assert agent_turns(record)[1]["scores"]  # judged as it stands
    assert summary.sessions[0]["turns_at_token_limit"] == 1 and summary.overall["turns_at_token_limit"] == 1
    assert "_(cut off at the token limit)_" in (run_dir / "transcripts" / f"{record['id']}.md").read_text()


async def test_failed_or_raising_agent_turn_is_recorded(run_dir):
    class Raises:
        name = "raiser"

        async def respond(self, persona, messages):
            raise RuntimeError("agent exploded")

    await simulate(config(), run_dir, agent=Raises())
    record = session(run_dir)
    assert record["stop_reason"] == "agent_failed"
    assert record["turns"][-1]["status"] == "failed" and "agent exploded" in record["turns"][-1]["error"]


# --- adversarial --------------------------------------------------------------------------------------
async def test_adversarial_levels_escalate_and_the_break_is_located(run_dir):
    register_script(
        "s-agent-breaks-at-2", lambda m, s: REFUSAL if "level 2" in m[-1]["content"] else "Well, I reckon so."
    )
    # A judge that never scores 1, so the refusal is the only break (the default test judge's scores are
    # hash-drawn from the prompt: any prompt change could make one of them a judge-detected break).
    register_script(
        "s-steady-judge",
        lambda m, s: json.dumps({"rationale": "fine", "score": 4, "contradictions": []} if s else "4"),
    )
    summary = await simulate(config(model="test:s-agent-breaks-at-2", turns=4, adversarial=True,
                                    judges=["test:s-steady-judge"]), run_dir)
    record = session(run_dir)
    users = [e for e in record["turns"] if e["role"] == "user"]
    assert [e["level"] for e in users] == [1, 1, 2, 3]
    assert [e["text"] for e in users] == [
        f"Question {i} at level {lv}, partner?" for i, lv in zip(range(1, 5), [1, 1, 2, 3], strict=True)
    ]
    assert record["break"]["turn"] == 3 and record["break"]["level"] == 2
    assert record["break"]["source"] == "refusal_marker"
    assert agent_turns(record)[2]["refusal_marker"]
    assert summary.overall["breaks_by_level"].get("2") == 1


async def test_no_break_without_markers_when_judges_are_kind(run_dir):
    register_script(
        "s-kind-judge",
        lambda m, s: json.dumps({"rationale": "fine", "score": 4, "contradictions": []} if s else "4"),
    )
    await simulate(config(judges=["test:s-kind-judge"], adversarial=True, turns=3), run_dir)
    record = session(run_dir)
    assert record["break"] is None
    assert record["session_verdict"]["breaks"] == []
    assert record["session_verdict"]["consistency"] == 4.0


def test_normal_sessions_have_no_levels():
    assert all(s.adversarial is False for s in session_specs(config()))


# --- judges -------------------------------------------------------------------------------------------
async def test_judge_that_is_the_agent_model_is_refused(run_dir):
    with pytest.raises(PersonagraphError, match="judge test:s-agent is also the agent's model"):
        await simulate(config(judges=["test:s-judge", "test:s-agent"]), run_dir)


async def test_judges_never_see_their_own_models_turns(run_dir):
    seen: dict[str, list[str]] = {"test:s-self": [], "test:s-judge-spy": []}

    def spy(name):
        def script(messages, schema):
            seen[name].append(messages[-1]["content"])
            return (
                json.dumps({"rationale": "ok", "score": 3, "contradictions": []}) if schema else "Sure thing."
            )

        return script

    register_script("s-self", spy("test:s-self"))
    register_script("s-judge-spy", spy("test:s-judge-spy"))
    judges = [ModelClient.create(s, "judge") for s in ("test:s-self", "test:s-judge-spy")]
    usable, skipped = split_judges(judges, "test:s-self")
    assert [str(j.spec) for j in usable] == ["test:s-judge-spy"] and skipped == ["test:s-self"]

    # in a session (chat passes judge clients): the agent's own model is skipped, the other judges score
    lines = iter(["Howdy, where are you from?", "What do you do all day?", "/quit"])
    record = await chat(
        PERSONA,
        PersonaAgent(ModelClient.create("test:s-self", "persona")),
        HumanUser(lambda view: next(lines)),
        run_dir,
        judges=judges,
    )
    assert record["stop_reason"] == "user_stop"
    assert all(set(e["scores"]) == {"test:s-judge-spy"} for e in agent_turns(record))
    assert record["session_verdict"]["skipped_judges"] == ["test:s-self"]
    assert seen["test:s-self"] and not any(
        "Response to evaluate" in text or "Agent turn" in text for text in seen["test:s-self"]
    )
    assert any("Response to evaluate" in text for text in seen["test:s-judge-spy"])

    # and when the transcript is judged afterwards, the agent's model is refused as a judge
    path = run_dir / "transcripts" / f"{record['id']}.jsonl"
    with pytest.raises(PersonagraphError, match="also the agent's model"):
        await judge_session(path, run_dir / "judged", judges=["test:s-self"])
    summary = await judge_session(path, run_dir / "judged", judges=["test:s-judge-spy"])
    assert summary.sessions[0]["agent_turns"] == 2
    assert summary.sessions[0]["task_means"] == {"Persona Consistency": 3.0, "Linguistic Habits": 3.0}


async def test_self_judging_when_allowed(run_dir):
    summary = await simulate(config(judges=["test:s-agent"], allow_self_judging=True, turns=1), run_dir)
    assert summary.judges == ["test:s-agent"]
    assert set(agent_turns(session(run_dir))[0]["scores"]) == {"test:s-agent"}


async def test_drift_is_the_slope_of_turn_scores(run_dir):
    def falling_judge(messages, schema):
        turn = (
            int(re.search(r"reply (\d)", messages[-1]["content"]).group(1))
            if "Response to" in messages[-1]["content"]
            else 0
        )
        if "contradictions" in json.dumps(schema):
            return json.dumps(
                {
                    "rationale": "r",
                    "contradictions": [
                        {"earlier_turn": 1, "later_turn": 3, "description": "changed home town"},
                        {"earlier_turn": 2, "later_turn": 9, "description": "turn 9 does not exist"},
                        {"earlier_turn": 2, "later_turn": 2, "description": "same turn"},
                    ],
                    "score": 2,
                }
            )
        return json.dumps({"rationale": "r", "score": max(1, 6 - turn)})

    register_script("s-falling-judge", falling_judge)
    register_script(
        "s-counting-agent", lambda m, s: f"My reply {sum(x['role'] == 'user' for x in m)}, partner."
    )
    await simulate(config(model="test:s-counting-agent", judges=["test:s-falling-judge"], turns=3), run_dir)
    record = session(run_dir)
    verdict = record["session_verdict"]
    assert [t["score"] for t in verdict["turn_means"]] == [5.0, 4.0, 3.0]
    assert record["drift_slope"] == pytest.approx(-1.0)
    assert verdict["drift_by_task"]["Persona Consistency"] == pytest.approx(-1.0)
    assert verdict["contradictions"] == [
        {
            "judge": "test:s-falling-judge",
            "earlier_turn": 1,
            "later_turn": 3,
            "description": "changed home town",
        }
    ]
    assert verdict["n_contradictions"] == 1.0 and verdict["consistency"] == 2.0


def test_drift_helper():
    assert drift([(1, 5.0), (2, 4.0), (3, 3.0)]) == pytest.approx(-1.0)
    assert drift([(1, 3.0), (2, 3.0)]) == 0.0
    assert drift([(1, 3.0)]) is None and drift([]) is None


# --- records, resume, concurrency ---------------------------------------------------------------------
async def test_every_finished_turn_is_in_the_store_as_it_finishes(run_dir):
    seen = []

    def on_event(kind, payload):
        if kind in ("user_turn", "agent_turn"):
            store = RunStore(run_dir, readonly=True)
            row = store.get("turn", f"{payload['session_id']}:{payload['index']}:{payload['role']}")
            running = store.get("session", payload["session_id"])
            store.close()
            seen.append((row is not None, running["status"], len(running["turns"])))

    await simulate(config(turns=2), run_dir, on_event=on_event)
    assert seen == [(True, "running", 1), (True, "running", 2), (True, "running", 3), (True, "running", 4)]


class Killed(BaseException):
    """Stands for the process being killed (not an Exception: nothing may swallow it)."""


class KillAtTurn:
    """The persona agent, except that asking it for turn ``at`` kills the run."""

    def __init__(self, at: int) -> None:
        self.inner = PersonaAgent(ModelClient.create("test:s-agent", "persona"))
        self.name = self.inner.name
        self.at = at

    async def respond(self, persona, messages):
        if sum(m["role"] == "user" for m in messages) == self.at:
            raise Killed
        return await self.inner.respond(persona, messages)


async def test_a_session_killed_after_turn_2_resumes_at_turn_3(run_dir):
    calls: list[int] = []
    register_script("s-user-counted", lambda m, s: calls.append(_turn_of(m)) or f"Question {_turn_of(m)}?")
    cfg = config(user_model="test:s-user-counted", turns=4)
    with pytest.raises(Killed):
        await simulate(cfg, run_dir, agent=KillAtTurn(3))
    interrupted = session(run_dir)
    assert interrupted["status"] == "running"
    assert [(e["index"], e["role"]) for e in interrupted["turns"]] == [
        (1, "user"),
        (1, "assistant"),
        (2, "user"),
        (2, "assistant"),
        (3, "user"),
    ]
    assert calls == [1, 2, 3]

    seen_by_agent: list[list[dict]] = []

    class Recording(PersonaAgent):
        async def respond(self, persona, messages):
            seen_by_agent.append(messages)
            return await super().respond(persona, messages)

    summary = await simulate(cfg, run_dir, agent=Recording(ModelClient.create("test:s-agent", "persona")))
    record = session(run_dir)
    assert record["status"] == "finished" and record["stop_reason"] == "max_turns"
    assert calls == [1, 2, 3, 4]  # turns 1-3 of the user were not asked again
    assert [m["content"] for m in seen_by_agent[0] if m["role"] == "user"] == [
        "Question 1?",
        "Question 2?",
        "Question 3?",
    ]
    assert len(seen_by_agent) == 2  # the agent resumed at turn 3
    assert [(e["index"], e["role"]) for e in record["turns"]][:5] == [
        (e["index"], e["role"]) for e in interrupted["turns"]
    ]
    assert record["turns"][:4] == interrupted["turns"][:4]
    assert len(record["turns"]) == 8 and summary.overall["finished"] == 1

    # a third run finds the session finished and asks nobody anything
    again = await simulate(cfg, run_dir, agent=Recording(ModelClient.create("test:s-agent", "persona")))
    assert calls == [1, 2, 3, 4] and len(seen_by_agent) == 2
    assert again.sessions == summary.sessions


async def test_k_sessions_run_concurrently_with_their_own_ids(run_dir):
    summary = await simulate(config(sessions=3, turns=2), run_dir)
    ids = [s["id"] for s in summary.sessions]
    assert len(set(ids)) == 3 and summary.overall["finished"] == 3
    assert sorted(p.name for p in (run_dir / "transcripts").glob("*.jsonl")) == sorted(
        f"{i}.jsonl" for i in ids
    )
    # the same config with more sessions reuses the first ones
    assert [s.id for s in session_specs(config(sessions=4, turns=2))][:3] == ids


# --- transcripts --------------------------------------------------------------------------------------
def test_read_plain_role_content_transcript(tmp_path):
    path = tmp_path / "plain.jsonl"
    path.write_text(
        "\n".join(
            json.dumps(x)
            for x in [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "howdy"},
                {"role": "user", "content": "bye"},
                {"role": "assistant", "content": "so long"},
            ]
        )
    )
    transcript = read_transcript(path)
    assert [(e["index"], e["role"]) for e in transcript["turns"]] == [
        (1, "user"),
        (1, "assistant"),
        (2, "user"),
        (2, "assistant"),
    ]
    assert transcript["persona"] == "" and transcript["id"].startswith("plain-")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("not json\n", r"bad.jsonl:1: invalid JSON \(Expecting value\)"),
        ('{"role": "robot", "content": "x"}\n', "role user/assistant"),
        ("", "no turns found"),
    ],
)
def test_bad_transcripts_are_named(tmp_path, content, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(PersonagraphError, match=message):
        read_transcript(path)


async def test_judge_session_needs_a_persona(tmp_path):
    path = tmp_path / "plain.jsonl"
    path.write_text(
        json.dumps({"role": "user", "content": "hi"})
        + "\n"
        + json.dumps({"role": "assistant", "content": "howdy"})
        + "\n"
    )
    with pytest.raises(PersonagraphError, match="names no persona"):
        await judge_session(path, tmp_path / "run", judges=["test:j"])
    summary = await judge_session(path, tmp_path / "run", judges=["test:j"], persona=PERSONA)
    assert summary.sessions[0]["agent_turns"] == 1


async def test_markdown_escapes_model_html(run_dir):
    register_script("s-html-agent", lambda m, s: "<script>alert(1)</script> howdy")
    await simulate(config(model="test:s-html-agent", turns=1), run_dir)
    md = next((run_dir / "transcripts").glob("*.md")).read_text()
    assert "<script>" not in md and "&lt;script&gt;" in md


# --- embedded -----------------------------------------------------------------------------------------
@pytest.mark.embedded
async def test_embedded_session_of_one_exchange(run_dir):
    cfg = SimulateConfig(
        persona=PERSONA,
        turns=1,
        max_agent_tokens=48,
        max_user_tokens=40,
        max_judge_tokens=96,
        max_verdict_tokens=160,
    )
    summary = await simulate(cfg, run_dir)
    record = session(run_dir)
    assert record["status"] == "finished"
    assert record["turns"][0]["role"] == "user" and record["turns"][0]["status"] == "ok"
    assert summary.overall["finished"] == 1
    assert summary.judges == ["local:qwen2.5-coder-1.5b"]


def test_a_session_killed_by_sigkill_resumes_at_turn_3(run_dir, tmp_path):
    """The real thing: the process running the session is killed -9 while the agent writes turn 3."""
    import asyncio
    import os
    import signal
    import subprocess
    import sys
    import textwrap
    import time

    marker = tmp_path / "turn3-started"
    script = tmp_path / "victim.py"
    script.write_text(
        textwrap.dedent(f"""
        import asyncio, pathlib, time
        from personagraph.models.testing import register_script
        from personagraph.runs.simulate import SimulateConfig
        from personagraph.runs.simulate import run as simulate

        register_script("s-user-k", lambda m, s: "Question?")

        class Hangs:
            name = "test:s-agent"

            async def respond(self, persona, messages):
                from personagraph.models import Completion
                if sum(m["role"] == "user" for m in messages) == 3:
                    pathlib.Path({str(marker)!r}).write_text("x")
                    time.sleep(600)
                return Completion("ok", "Howdy, partner.")

        cfg = SimulateConfig(persona={PERSONA!r}, model="test:s-agent", user_model="test:s-user-k",
                             judges=["test:s-judge"], turns=4)
        asyncio.run(simulate(cfg, {str(run_dir)!r}, agent=Hangs()))
    """)
    )
    victim = subprocess.Popen(
        [sys.executable, str(script)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 240
        while not marker.exists():
            assert victim.poll() is None, victim.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline, "the session never reached turn 3"
            time.sleep(0.2)
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait(30)
    finally:
        if victim.poll() is None:
            victim.kill()
    interrupted = session(run_dir)
    assert interrupted["status"] == "running" and len(interrupted["turns"]) == 5

    register_script("s-user-k", lambda m, s: "Question?")
    cfg = config(user_model="test:s-user-k", turns=4)
    asyncio.run(simulate(cfg, run_dir))
    record = session(run_dir)
    assert record["status"] == "finished" and len(record["turns"]) == 8
    assert record["turns"][:4] == interrupted["turns"][:4]
    assert [e["index"] for e in record["turns"]] == [1, 1, 2, 2, 3, 3, 4, 4]
    store = RunStore(run_dir, readonly=True)
    calls = {row["role"]: row["calls"] for row in store.call_stats()}
    store.close()
    assert calls["user_sim"] == 4  # three before the kill, one after: the user was not asked again
    assert calls["persona"] == 2  # the resumed run asked the agent for turns 3 and 4 only


@pytest.mark.skipif(
    not __import__("os").environ.get("PERSONAGRAPH_TEST_POSTGRES_URL"),
    reason="set PERSONAGRAPH_TEST_POSTGRES_URL=postgresql://… to test the Postgres checkpointer",
)
async def test_postgres_checkpointer_resumes_and_restores(run_dir, tmp_path):
    import os
    import uuid

    url = os.environ["PERSONAGRAPH_TEST_POSTGRES_URL"]
    cfg = config(turns=3, seed=uuid.uuid4().int % 10**9)  # fresh thread ids in a shared database
    with pytest.raises(Killed):
        await simulate(cfg, run_dir, agent=KillAtTurn(2), checkpoint_url=url)
    assert not (run_dir / "checkpoints.sqlite").exists()
    summary = await simulate(cfg, run_dir, checkpoint_url=url)
    record = session(run_dir)
    assert record["status"] == "finished" and [e["index"] for e in record["turns"]] == [1, 1, 2, 2, 3, 3]
    store = RunStore(run_dir, readonly=True)
    assert "***" in store.get_meta("checkpointer") or "@" not in url
    store.close()
    # another run directory on the same database: the finished session's record comes from the checkpoint
    elsewhere = tmp_path / "elsewhere"
    again = await simulate(cfg, elsewhere, checkpoint_url=url)
    assert again.sessions == summary.sessions and again.llm_calls == 0
