"""The third red-team pass (findings 2026-12-04, N-1 … N-21): one parametrised test per finding. Offline:
``test:*`` models, plug-in agents defined here and ``bench/fake_openai.py`` on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _cli import cli, one_line_error, tree

from personagraph.errors import PersonagraphError
from personagraph.testing import PersonaAssertionError, PersonaTester

FAST = ["--environments", "1", "--questions-per-task", "1"]
PERSONA = "A retired cowboy from Texas"
EVAL = ["eval", "--persona", PERSONA, "-j", "test:j1", *FAST]








def summary_of(run_dir: Path) -> dict:
    return json.loads((run_dir / "summary.json").read_text())


# --- N-1: a persona test fails when its agent never answered; thresholds are checked up front ----------
def crashing_agent(messages: list[dict]) -> str:
    raise RuntimeError("plug-in agent crashed on purpose")


async def async_crashing_agent(messages: list[dict]) -> str:
    raise RuntimeError("async plug-in agent crashed on purpose")


def none_agent(messages: list[dict]) -> None:
    return None


@pytest.mark.parametrize("agent,reason", [
    (crashing_agent, "crashed on purpose"),
    (async_crashing_agent, "crashed on purpose"),
    (none_agent, "failed"),
    ("test:down", "failed"),
], ids=["crash", "async-crash", "none-reply", "test-down"])
def test_n01_a_run_whose_agent_failed_fails_the_persona_test(tmp_path: Path, agent: object, reason: str) -> None:
    tester = PersonaTester("t::n01", tmp_path)
    with pytest.raises(PersonaAssertionError) as failed:
        tester.assert_persona(agent, PERSONA, judges=["test:j1"], min_score=1)
    message = str(failed.value)
    assert "the run did not complete" in message and reason in message


@pytest.mark.parametrize("kwargs,named", [
    ({"min_score": float("nan")}, "min_score"),
    ({"min_score": -1}, "min_score"),
    ({"min_score": 10}, "min_score"),
    ({"min_score": True}, "min_score"),
    ({"tasks": {"toxicity": float("nan")}}, "tasks"),
    ({"tasks": {"toxicity": 6}}, "tasks"),
], ids=["nan", "negative", "above-scale", "bool", "task-nan", "task-above"])
def test_n01_a_threshold_off_the_scale_is_refused_before_any_call(tmp_path: Path, kwargs: dict,
                                                                  named: str) -> None:
    tester = PersonaTester("t::n01", tmp_path)
    with pytest.raises(PersonagraphError, match=named) as refused:
        tester.assert_persona("test:agent", PERSONA, judges=["test:j1"], **kwargs)
    assert "\n" not in str(refused.value) and not tester.ledger.runs
    assert not (tmp_path / ".personagraph").exists()


@pytest.mark.parametrize("kwargs", [{"min_consistency": float("nan")}, {"min_consistency": 0},
                                    {"max_drift": -1}, {"max_drift": float("inf")}],
                         ids=["consistency-nan", "consistency-0", "drift-negative", "drift-inf"])
def test_n01_a_session_threshold_off_the_scale_is_refused(tmp_path: Path, kwargs: dict) -> None:
    tester = PersonaTester("t::n01", tmp_path)
    with pytest.raises(PersonagraphError, match=next(iter(kwargs))):
        tester.assert_session("test:agent", PERSONA, judges=["test:j1"], user_model="test:user", turns=1,
                              **kwargs)
    assert not tester.ledger.runs


def test_n01_a_session_run_whose_agent_failed_fails(tmp_path: Path) -> None:
    tester = PersonaTester("t::n01", tmp_path)
    with pytest.raises(PersonaAssertionError, match="the run did not complete"):
        tester.assert_session("test:down", PERSONA, judges=["test:j1"], user_model="test:user", turns=1,
                              sessions=1, min_consistency=None)


def test_n01_a_throwaway_project_whose_agent_crashes_fails_naming_the_crash(tmp_path: Path) -> None:
    (tmp_path / "agents_rt.py").write_text(textwrap.dedent("""
        def crash(messages):
            raise RuntimeError("plug-in agent crashed on purpose")
    """))
    (tmp_path / "test_persona.py").write_text(textwrap.dedent("""
        from personagraph.testing import assert_persona

        def test_cowboy():
            assert_persona("agents_rt:crash", "A retired cowboy from Texas", judges=["test:j1"], min_score=1)
    """))
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_persona.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])})
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 failed" in done.stdout and "plug-in agent crashed on purpose" in done.stdout


# --- N-2: a judge-check/ link in an eval run directory is refused ------------------------------------
def test_n02_a_judge_check_link_is_refused_and_its_target_untouched(tmp_path: Path) -> None:
    run_dir, outside = tmp_path / "run", tmp_path / "outside"
    outside.mkdir()
    assert cli(*EVAL, "-m", "test:agent", "--run-dir", str(run_dir))[0] == 0
    (run_dir / "judge-check").symlink_to(outside)
    code, output = cli(*EVAL, "-m", "test:agent", "--judge-check", "1", "--run-dir", str(run_dir))
    assert code == 2 and "judge-check: is a symbolic link" in one_line_error(output)
    assert list(outside.iterdir()) == []


# --- N-3: a store that lost its records beside finished checkpoints ------------------------------------
@pytest.mark.parametrize("lost", [
    "DELETE FROM records",
    "DELETE FROM records WHERE kind IN ('verdict', 'item_score', 'unit_done', 'persona_done')",
    "DELETE FROM records; DELETE FROM calls",
], ids=["all-records", "verdicts-and-ends", "records-and-calls"])
def test_n03_lost_records_are_run_again_and_the_scores_equal_the_first_run(tmp_path: Path, lost: str) -> None:
    run_dir = tmp_path / "run"
    command = [*EVAL, "-m", "test:agent", "--run-dir", str(run_dir)]
    assert cli(*command)[0] == 0
    first = summary_of(run_dir)
    db = sqlite3.connect(run_dir / "run.sqlite")
    db.executescript(lost)
    db.close()
    code, output = cli(*command)
    again = summary_of(run_dir)
    assert code == 0, output
    assert again["models"] == first["models"] and again["verdicts"] == first["verdicts"] > 0


# --- N-4: a changed --samples scores the samples it asks for ------------------------------------------
def test_n04_fewer_samples_on_a_run_dir_score_only_those(tmp_path: Path) -> None:
    base = [*EVAL, "-m", "test:seeded"]
    assert cli(*base, "--samples", "3", "--run-dir", str(tmp_path / "three"))[0] == 0
    code, said = cli(*base, "--samples", "1", "--run-dir", str(tmp_path / "three"))
    assert code == 0 and "scored 1 sample(s) per question; 10 stored answers of further samples" in said
    assert cli(*base, "--samples", "1", "--run-dir", str(tmp_path / "one"))[0] == 0
    reused, fresh = summary_of(tmp_path / "three"), summary_of(tmp_path / "one")
    assert reused["models"]["test:seeded"]["answers"] == fresh["models"]["test:seeded"]["answers"] == 5
    assert reused["models"]["test:seeded"]["persona_score"] == fresh["models"]["test:seeded"]["persona_score"]
    assert reused["llm_calls"] == 0 and reused["answers_not_asked"] == 10


# --- N-5: eval --judge-check asks with the eval's protocol and says which ------------------------------
def test_n05_the_judge_check_uses_the_eval_protocol(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    code, output = cli(*EVAL, "-m", "test:agent", "--judge-check", "1", "--judge-protocol", "rationale",
                       "--run-dir", str(run_dir))
    assert code in (0, 3), output
    check = json.loads((run_dir / "judge-check" / "judge_check.json").read_text())
    assert check["protocols"] == {"test:j1": "rationale"}
    assert "judge check protocols: test:j1 rationale" in output


# --- N-12: failed control arms are incomplete and never flag the judges ----------------------------------
def test_n12_controls_of_a_failing_agent_flag_nothing(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    code, output = cli(*EVAL, "-m", "test:down", "--controls", "--run-dir", str(run_dir))
    controls = summary_of(run_dir)["controls"]
    assert code == 3 and not controls["flagged"] and not controls["flags"]
    assert all(row["incomplete"] and not row["flagged"] for row in controls["standing"])
    assert controls["arms"]["control:contrast:test:down"]["incomplete"] is True
    assert "NOT clearly below" not in output and "no verdict on the judges" in output


# --- N-6: integers past Python's digit limit in any JSON or YAML input are one line -------------------------
BIG = "9" * 5000


@pytest.mark.parametrize("name,text,command", [
    ("in.jsonl", f'{{"persona": "A nurse", "age": {BIG}}}\n', ["eval", "--personas", "{f}", "-m", "test:agent",
                                                               "-j", "test:j1", "--run-dir", "{run}"]),
    ("in.yaml", f"- persona: A nurse\n  age: {BIG}\n", ["eval", "--personas", "{f}", "-m", "test:agent",
                                                        "-j", "test:j1", "--run-dir", "{run}"]),
    ("in.jsonl", f'{{"id": "a", "score": {BIG}}}\n', ["meta-eval", "--items", "{f}", "-j", "test:j1",
                                                      "--run-dir", "{run}"]),
    ("in.jsonl", f'{{"id": "a", "score": {BIG}}}\n', ["score", "--input", "{f}", "--metrics", "bleu",
                                                      "--output", "{run}.jsonl"]),
    ("in.jsonl", f'{{"role": "user", "text": "hi", "index": {BIG}}}\n', ["judge-session", "{f}", "-j", "test:j1",
                                                                       "--run-dir", "{run}"]),
    ("in.jsonl", f'{{"user_id": "u", "text": "hi", "n": {BIG}}}\n', ["memory", "import", "{f}",
                                                                   "--memory-dir", "{run}"]),
], ids=["eval-jsonl", "eval-yaml", "meta-eval", "score", "judge-session", "memory-import"])
def test_n06_a_5000_digit_number_is_one_line_and_leaves_nothing(tmp_path: Path, name: str, text: str,
                                                                command: list[str]) -> None:
    source = tmp_path / name
    source.write_text(text)
    run = tmp_path / "run"
    code, output = cli(*(part.replace("{f}", str(source)).replace("{run}", str(run)) for part in command))
    assert code == 2 and "a number of 5000 digits" in one_line_error(output)
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]


# --- N-10: log-probabilities and numbers in a judge's reply are checked ------------------------------------
@pytest.mark.parametrize("logprob", [5.0, 1e-9, float("nan"), float("inf"), float("-inf"), True, "0.5"],
                         ids=["positive", "barely-positive", "nan", "inf", "minus-inf", "bool", "positive-text"])
@pytest.mark.parametrize("where", ["token", "alternative"])
def test_n10_an_impossible_log_probability_drops_the_set(logprob: object, where: str) -> None:
    from personagraph.models.openai_http import parse_logprobs

    good = {"token": "3", "logprob": -0.1, "top_logprobs": [{"token": "3", "logprob": -0.1},
                                                           {"token": "4", "logprob": -2.5}]}
    bad = json.loads(json.dumps(good))
    if where == "token":
        bad["logprob"] = logprob
    else:
        bad["top_logprobs"][1]["logprob"] = logprob
    assert parse_logprobs({"content": [good]}) is not None
    assert parse_logprobs({"content": [good, bad]}) is None


@pytest.mark.parametrize("reply", ['{"rationale": "fine", "score": true}',
                                   '{"rationale": "fine", "score": false}'], ids=["true", "false"])
def test_n10_a_bool_score_is_not_a_verdict(tmp_path: Path, reply: str) -> None:
    from personagraph.models import ModelClient
    from personagraph.models.testing import register_script
    from personagraph.schemas import JudgeReply

    register_script("rt-bool-judge", lambda messages, schema: reply)
    client = ModelClient.create("test:rt-bool-judge", "judge")
    result = asyncio.run(client.structured([{"role": "user", "content": "judge"}], JudgeReply))
    assert result.status == "failed" and "a bool where a number belongs" in (result.error or "")


# --- N-11: evaluators: untrusted replies and odd arguments are values or one-line errors ---------------------
def test_n11_a_deeply_nested_judge_reply_is_an_unscored_verdict() -> None:
    from personagraph.evaluators import create_persona_judge

    judge = create_persona_judge(judge=lambda messages: "[" * 100_000 + "]" * 100_000, protocol="rationale")
    result = judge(inputs={"persona": PERSONA, "question": "How do you travel?"}, outputs="On horseback.")
    assert result["score"] is None and result["metadata"]["status"] == "failed"


@pytest.mark.parametrize("kwargs,call,named", [
    ({"judge": "test:j1", "key": 5}, None, "key"),
    ({"judge": "test:j1", "key": ""}, None, "key"),
    ({"judge": "test:j1", "score_kind": "median"}, None, "score_kind"),
    ({"judge": "test:j1"}, {"outputs": "a\ud800b"}, "outputs"),
    ({"judge": "test:j1"}, {"outputs": "fine", "inputs": {"persona": "A nurse\udc8c", "question": "Hi?"}}, "inputs"),
], ids=["key-int", "key-empty", "score-kind", "surrogate-outputs", "surrogate-persona"])
def test_n11_bad_evaluator_arguments_are_one_line(kwargs: dict, call: dict | None, named: str) -> None:
    from personagraph.evaluators import create_persona_judge

    with pytest.raises(PersonagraphError, match=named) as refused:
        judge = create_persona_judge(**kwargs)
        assert call is not None
        judge(**{"inputs": {"persona": PERSONA, "question": "How do you travel?"}, **call})
    assert "\n" not in str(refused.value)


def test_n11_a_bool_score_from_a_plug_in_judge_is_not_a_score() -> None:
    from personagraph.evaluators import create_persona_judge

    judge = create_persona_judge(judge=lambda messages: '{"rationale": "yes", "score": true}', protocol="rationale")
    result = judge(inputs={"persona": PERSONA, "question": "How do you travel?"}, outputs="On horseback.")
    assert result["score"] is None and "a bool where a number belongs" in result["comment"]


# --- N-15: the pytest cache folder: one-line errors, never written through a link, no chained noise ----------
@pytest.mark.parametrize("plant", ["cache is a file", "dangling .gitignore link", "cache is a link",
                                   "test folder is a link"])
def test_n15_a_bad_cache_folder_is_one_line_and_nothing_is_written_outside(tmp_path: Path, plant: str) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    cache = root / ".personagraph"
    if plant == "cache is a file":
        cache.write_text("x")
    elif plant == "dangling .gitignore link":
        cache.mkdir()
        (cache / ".gitignore").symlink_to(outside / "victim")
    elif plant == "cache is a link":
        cache.symlink_to(outside)
    else:
        cache.mkdir()
        (cache / "t_n15").symlink_to(outside)
    tester = PersonaTester("t::n15", root)
    with pytest.raises(PersonagraphError, match=r"\.personagraph") as refused:
        tester.assert_persona("test:agent", PERSONA, judges=["test:j1"], min_score=1)
    assert "\n" not in str(refused.value) and list(outside.iterdir()) == []
    assert not isinstance(refused.value.__context__, RuntimeError)  # not chained to an event-loop probe's


# --- N-7: judge-session checks every field of a turn line before the store is opened ------------------------
@pytest.mark.parametrize("turn,named", [
    ({"role": "user", "text": "hi", "level": 99}, "level"),
    ({"role": "user", "text": "hi", "level": "x"}, "level"),
    ({"role": "user", "text": "hi", "status": ["x"]}, "status"),
    ({"role": "user", "text": "hi", "error": {"a": 1}}, "error"),
    ({"role": "user", "text": "hi", "index": 10**23}, "index"),
], ids=["level-99", "level-text", "status-list", "error-object", "index-huge"])
def test_n07_a_bad_turn_field_is_one_line_naming_it(tmp_path: Path, turn: dict, named: str) -> None:
    source = tmp_path / "t.jsonl"
    lines = [{"type": "header", "id": "lvl", "persona": "A nurse"}, turn, {"role": "assistant", "text": "hello"}]
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))
    code, output = cli("judge-session", str(source), "-j", "test:j1", "--run-dir", str(tmp_path / "run"))
    assert code == 2 and f"{source}:2: {named}:" in one_line_error(output)
    assert not (tmp_path / "run").exists()


def test_n07_a_transcript_longer_than_a_session_is_one_line(tmp_path: Path) -> None:
    source = tmp_path / "t.jsonl"
    turns = [{"role": role, "text": "hi"} for _ in range(300) for role in ("user", "assistant")]
    source.write_text("".join(json.dumps(turn) + "\n" for turn in turns))
    code, output = cli("judge-session", str(source), "-j", "test:j1", "--run-dir", str(tmp_path / "run"))
    assert code == 2 and "past the longest session" in one_line_error(output)
    assert not (tmp_path / "run").exists()


# --- N-13: chat on stdin that is not UTF-8 ----------------------------------------------------------------
def test_n13_chat_on_bytes_that_are_not_utf8_is_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "personagraph.cli", "-q", "chat", "-p", "A nurse", "-m",
                           "test:agent", "--turns", "2", "--run-dir", str(run_dir)],
                          input=bytes(range(128, 256)) * 20 + b"\n", capture_output=True, timeout=120)
    stderr = done.stderr.decode("utf-8", "replace")
    assert done.returncode == 2, stderr
    assert "stdin: not UTF-8 text" in stderr and "internal error" not in stderr
    assert not run_dir.exists()


# --- N-14, N-21: numeric flags out of range are refused before any work --------------------------------------
@pytest.mark.parametrize("args", [
    ["longlamp", "--data", "{f}", "-m", "test:agent", "--retriever", "random", "--seed", "-1"],
    ["longlamp", "--data", "{f}", "-m", "test:agent", "--max-tokens", "99999999999"],
    ["persobench", "--data", "{f}", "-m", "test:agent", "--max-tokens", "99999999999"],
    ["score", "--input", "{f}", "--metrics", "bertscore", "--output", "{run}.jsonl", "--bertscore-layers", "999"],
], ids=["longlamp-seed", "longlamp-max-tokens", "persobench-max-tokens", "score-bertscore-layers"])
def test_n14_n21_an_out_of_range_number_is_refused_up_front(tmp_path: Path, args: list[str]) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text('{"id": "a"}\n')
    run = tmp_path / "run"
    flag = args[-2]
    if args[0] != "score":
        args = [*args, "--run-dir", "{run}"]
    code, output = cli(*(a.replace("{f}", str(source)).replace("{run}", str(run)) for a in args))
    assert code == 2 and f"{flag}" in output and "Input should be" in output  # the CLI's main: one line
    assert "Traceback" not in output and "internal error" not in output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]


# --- N-9: a request that never answers: a bounded --timeout (also an API keyword) and a notice ---------------
def test_n09_a_stalled_request_is_announced_and_retried_after_the_timeout(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from bench.fake_openai import start_in_thread

    monkeypatch.setattr("personagraph.models.client.STILL_WAITING_S", 0.3)
    with start_in_thread(rate_timeout=0.2, timeout_sleep=30, seed=2) as server:
        code, output = cli("eval", "--persona", "A nurse", "-m", "openai:agent", "-j", "test:j1", *FAST,
                           "--base-url", server.base_url, "--api-key", "sk-test", "--timeout", "1",
                           "--run-dir", str(tmp_path / "run"))
        assert server.stats().faults["timeout"] > 0
    assert code == 0, output
    assert "openai:agent: still waiting for a reply after 0.3 s (retried after 1 s: --timeout)" in output


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), 10**9], ids=["zero", "negative", "nan", "huge"])
def test_n09_a_bad_timeout_is_refused_naming_it(tmp_path: Path, timeout: float) -> None:
    from personagraph import evaluate

    with pytest.raises(PersonagraphError, match="^timeout: Input should be"):
        evaluate("A nurse", models=["test:agent"], judges=["test:j1"], timeout=timeout, run_dir=tmp_path / "run")
    assert not (tmp_path / "run").exists()


# --- N-20: URLs that cannot work are refused up front, without repeating their secret -----------------------
@pytest.mark.parametrize("args", [
    ["-m", "openai:agent", "--base-url", "http://bob:hunter2pass@127.0.0.1:9/v1"],
    ["-m", "openai:agent", "--base-url", "http://127.0.0.1:9/v1?api_key=hunter2query"],
    ["-m", "openai@x:agent", "--endpoint", "x=http://127.0.0.1:9/v1?key=hunter2query"],
    ["-m", "openai@x:agent", "--endpoint", "x=http://u:hunter2pass@127.0.0.1:9/v1"],
], ids=["base-url-password", "base-url-query", "endpoint-query", "endpoint-password"])
def test_n20_a_url_with_credentials_or_a_query_is_refused(tmp_path: Path, args: list[str]) -> None:
    code, output = cli("eval", "--persona", "A nurse", *args, "-j", "test:j1", "--run-dir", str(tmp_path / "run"))
    line = one_line_error(output)
    assert code == 2 and "hunter2" not in output and ("password" in line or "query" in line)
    assert not (tmp_path / "run").exists()


# --- N-18: simulate transcripts hold no raw terminal escapes from model output -------------------------------
def test_n18_a_transcript_file_shows_escapes_as_text(tmp_path: Path) -> None:
    from personagraph.models.testing import register_script, value_for

    hostile = "\x1b[31mred\x1b[0m \x1b]8;;http://x\x07link\x1b]8;;\x07 \x1b]0;title\x07 \x1b[2J\x9b2J done"

    def agent(messages: list[dict], schema: dict | None) -> str:
        import random

        return json.dumps(value_for(schema, random.Random(0), schema, messages)) if schema else hostile

    register_script("rt-escapes", agent)
    code, output = cli("simulate", "--persona", "A pediatric nurse", "-m", "test:rt-escapes", "-j", "test:j1",
                       "--user-model", "test:user", "--turns", "1", "--run-dir", str(tmp_path / "run"))
    assert code == 0, output
    texts = [p.read_text() for p in (tmp_path / "run" / "transcripts").glob("*.md")]
    assert texts and all("\x1b" not in t and "\x9b" not in t and "\x07" not in t for t in texts)
    assert any("\\x1b[31mred" in t for t in texts)


# --- N-19: plug-in agents' answers are cut at --max-answer-tokens, like a model's -----------------------------
def huge_agent(messages: list[dict]) -> str:
    return "ha" * 200_000


def test_n19_a_plug_in_agents_huge_answer_is_cut_and_marked(tmp_path: Path) -> None:
    from personagraph import evaluate
    from personagraph.models.client import TRUNCATED_MARK, char_budget

    run_dir = tmp_path / "run"
    summary = evaluate(PERSONA, models=[huge_agent], judges=["test:j1"], environments=1, questions_per_task=1,
                       max_answer_tokens=64, run_dir=run_dir)
    db = sqlite3.connect(run_dir / "run.sqlite")
    answers = [json.loads(d)["text"] for (d,) in db.execute("SELECT data FROM records WHERE kind='answer'")]
    budget = char_budget(64)
    assert answers and all(a.endswith(TRUNCATED_MARK.strip()) and len(a) <= budget + len(TRUNCATED_MARK)
                           for a in answers)
    assert max(len(r) for (r,) in db.execute("SELECT request FROM calls WHERE role='judge'")) < 100_000
    assert summary.models[next(iter(summary.models))]["answers_at_token_limit"] == len(answers)


def test_n19_a_plug_in_agents_huge_reply_in_a_session_is_cut_and_marked(tmp_path: Path, monkeypatch) -> None:
    """simulate treats a plug-in agent as eval does: its replies are cut at --max-agent-tokens and marked."""
    from personagraph import simulate
    from personagraph.models.client import TRUNCATED_MARK, char_budget

    (tmp_path / "huge_session_agent.py").write_text("def agent(messages):\n    return 'ha' * 200_000\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    summary = simulate(PERSONA, agent="huge_session_agent:agent", user_model="test:user", judges=["test:j1"],
                       turns=2, max_agent_tokens=64, run_dir=tmp_path / "run")
    db = sqlite3.connect(tmp_path / "run" / "run.sqlite")
    replies = [t for (t,) in db.execute("SELECT text FROM calls WHERE role='persona'")]
    assert replies and all(r.endswith(TRUNCATED_MARK.strip()) and len(r) <= char_budget(64) + len(TRUNCATED_MARK)
                           for r in replies)
    assert summary.overall["turns_at_token_limit"] == summary.overall["agent_turns"] == 2


# --- N-16: identical requests in flight at once are sent once -------------------------------------------------
def test_n16_identical_judge_requests_of_samples_and_controls_are_sent_once(tmp_path: Path) -> None:
    import random
    from collections import Counter

    from personagraph.models.testing import register_script, value_for

    seen: Counter[str] = Counter()

    def judge(messages: list[dict], schema: dict | None) -> str:
        seen[json.dumps([messages, schema], sort_keys=True)] += 1
        return json.dumps(value_for(schema, random.Random(0), schema, messages)) if schema else "fine"

    register_script("slow-rt-counting-judge", judge)
    code, output = cli("eval", "--persona", PERSONA, "-m", "test:agent", "-j", "test:slow-rt-counting-judge", *FAST,
                       "--samples", "3", "--controls", "--run-dir", str(tmp_path / "run"))
    assert code == 0, output
    assert seen and max(seen.values()) == 1, [n for n in seen.values() if n > 1]


# --- N-8: a full disk when the run starts is one line, and leaves no run.lock -----------------------------------
@pytest.mark.parametrize("kind", ["eval", "simulate", "eval-finished"])
def test_n08_a_full_disk_at_the_start_is_one_line_and_leaves_nothing(tmp_path: Path, kind: str,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    run_dir = tmp_path / "run"
    command = (["simulate", "--persona", "A pediatric nurse", "-m", "test:agent", "-j", "test:j1",
                "--user-model", "test:user", "--turns", "1"] if kind == "simulate"
               else [*EVAL, "-m", "test:agent"])
    if kind == "eval-finished":
        assert cli(*command, "--run-dir", str(run_dir))[0] == 0
    before = tree(run_dir) if run_dir.exists() else None

    def full(fd: int, data: bytes, offset: int) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr("personagraph.store.os.pwrite", full)
    code, output = cli(*command, "--run-dir", str(run_dir))
    assert code == 2 and "No space left on device" in one_line_error(output)
    assert (tree(run_dir) if run_dir.exists() else None) == before


# --- N-17: a run directory nothing can be written in is named as such, not its checkpoint store ----------------
@pytest.mark.skipif(os.geteuid() != 0, reason="chattr +i needs root")
def test_n17_an_immutable_run_dir_is_one_line_about_the_directory(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    command = [*EVAL, "-m", "test:agent", "--run-dir", str(run_dir)]
    assert cli(*command)[0] == 0
    if subprocess.run(["chattr", "+i", str(run_dir)], capture_output=True).returncode != 0:
        pytest.skip("this file system has no immutable flag")
    try:
        code, output = cli(*command)
    finally:
        subprocess.run(["chattr", "-i", str(run_dir)], check=True)
    line = one_line_error(output)
    assert code == 2 and "cannot write there" in line and "delete it" not in line


# --- N-2, N-15: no write through a link in any folder personagraph makes ------------------------------------------
@pytest.mark.parametrize("where", ["judge-check/run.sqlite", "judge-check/run.lock", "judge-check/judge_check.json",
                                   "transcripts/{session}.md"])
def test_n02_a_link_inside_a_folder_of_the_run_leaves_its_target_unchanged(tmp_path: Path, where: str) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim").write_text("VICTIM")
    run_dir = tmp_path / "run"
    if where.startswith("transcripts"):
        command = ["simulate", "--persona", "A pediatric nurse", "-m", "test:agent", "-j", "test:j1",
                   "--user-model", "test:user", "--turns", "1", "--run-dir", str(run_dir)]
        assert cli(*command)[0] == 0
        target = next((run_dir / "transcripts").glob("*.md"))
        target.unlink()
        (run_dir / "run.sqlite").unlink()  # the session runs again and writes its transcript again
        for extra in ("checkpoints.sqlite", "summary.json"):
            (run_dir / extra).unlink()
    else:
        command = [*EVAL, "-m", "test:agent", "--judge-check", "1", "--run-dir", str(run_dir)]
        assert cli(*command)[0] in (0, 3)
        target = run_dir / where
        target.unlink()
        for name in ("run.sqlite-wal", "run.sqlite-shm"):
            (target.parent / name).unlink(missing_ok=True)
    target.symlink_to(outside / "victim")
    cli(*command)
    assert (outside / "victim").read_text() == "VICTIM" and sorted(os.listdir(outside)) == ["victim"]


# --- minor notes: lengths of benchmark questions, --user-persona and --scenario are bounded -------------------------
@pytest.mark.parametrize("what", ["benchmark-question", "user-persona", "scenario"])
def test_minor_an_over_long_text_input_is_one_line(tmp_path: Path, what: str) -> None:
    run_dir = tmp_path / "run"
    if what == "benchmark-question":
        bench = tmp_path / "bench"
        bench.mkdir()
        (bench / "A nurse.json").write_text(json.dumps({"Toxicity Control": ["Why? " * 200_000]}))
        args = ["eval", "--benchmark", str(bench), "-m", "test:agent", "-j", "test:j1"]
    else:
        args = ["simulate", "--persona", "A nurse", "-m", "test:agent", "-j", "test:j1", "--user-model", "test:user",
                f"--{what}", "x" * 100_000]
    code, output = cli(*args, "--run-dir", str(run_dir))
    assert code == 2 and ("4000" in one_line_error(output)) and not run_dir.exists()


@pytest.fixture
def full_disk(tmp_path: Path):  # noqa: ANN201 - a generator fixture
    """A small tmpfs filled to the last byte (root only; skipped where mounting is not allowed)."""
    mount = tmp_path / "full"
    mount.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)],
                                           capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        fd = os.open(mount / "fill", os.O_WRONLY | os.O_CREAT)
        try:
            while os.write(fd, b"\0" * 4096):
                pass
        except OSError:
            pass
        finally:
            os.close(fd)
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.mark.parametrize("command", ["eval", "memory-import"])
def test_n08_a_really_full_disk_is_one_line_and_leaves_nothing(tmp_path: Path, full_disk: Path,
                                                               command: str) -> None:
    if command == "eval":
        args = [*EVAL, "-m", "test:agent", "--run-dir", str(full_disk / "run")]
    else:
        source = tmp_path / "mem.jsonl"
        source.write_text('{"user_id": "u1", "id": "m0", "event": "went fishing"}\n')
        args = ["memory", "import", str(source), "--memory-dir", str(full_disk / "mem")]
    code, output = cli(*args)
    line = one_line_error(output)
    assert code == 2 and ("No space left" in line or "disk is full" in line)
    assert sorted(os.listdir(full_disk)) == ["fill"]


# --- the SIGTERM that never ended a process: it must not raise at whatever line the main thread is on --------------
SIGTERM_PROBE = """
import asyncio, os, signal, threading, time
import typer
from personagraph.cli._common import run

signal.signal(signal.SIGINT, signal.SIG_IGN)  # a job a script starts with `&`
lock, state = threading.Lock(), {"loop": "interrupted"}

async def work():
    threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGTERM)).start()
    deadline = time.monotonic() + 0.6
    while time.monotonic() < deadline:  # a stretch without an await: locks taken and released
        with lock:
            pass
    state["loop"] = "finished"
    await asyncio.sleep(30)

try:
    run(work)
except typer.Exit as done:
    print(state["loop"], "lock held" if lock.locked() else "lock free", done.exit_code, flush=True)
"""


def test_sigterm_with_sigint_ignored_cancels_at_an_await_not_mid_line(tmp_path: Path) -> None:
    started = subprocess.run([sys.executable, "-c", SIGTERM_PROBE], capture_output=True, text=True, timeout=60)
    assert started.stdout.split() == ["finished", "lock", "free", "143"], started.stdout + started.stderr
    assert "terminated (SIGTERM): finished items are saved" in started.stderr
