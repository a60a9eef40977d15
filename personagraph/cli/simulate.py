"""``personagraph simulate``: K multi-turn sessions (simulated user ↔ agent), judged turn by turn."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.console import RenderableType

from personagraph.cli._common import (
    API_KEY_OPTION,
    BASE_URL_OPTION,
    ENDPOINT_OPTION,
    RETRY_FAILED_OPTION,
    TIMEOUT_OPTION,
    console,
    default_of,
    model_settings,
    progress_display,
    run,
)
from personagraph.errors import PersonagraphError
from personagraph.models.settings import MAX_CONCURRENCY
from personagraph.report.tables import Column
from personagraph.report.tables import Table as ReportTable
from personagraph.report.view import rich_table, validity_text
from personagraph.runs.base import make_config
from personagraph.runs.simulate import (
    DEFAULT_AGENT,
    DEFAULT_JUDGE,
    DEFAULT_USER,
    SimulateConfig,
    SimulateSummary,
    session_specs,
)
from personagraph.runs.simulate import run as run_simulate

MAX_SESSION_BARS = 8


def _fmt(value: float | None, spec: str = ".2f") -> str:
    return "—" if value is None else format(value, spec)


def short_name(session_id: str) -> str:
    """``<persona-slug>-<n>-<hash>`` → ``<n>-<hash>`` (the full id names the transcript files)."""
    parts = session_id.rsplit("-", 2)
    return "-".join(parts[-2:]) if len(parts) == 3 and parts[-2].isdigit() else session_id


def render_sessions(summary: dict[str, Any]) -> RenderableType:
    """One row per session, then the overall numbers (also used after ``judge-session``), laid out to the
    terminal's width as ``view`` lays out its tables (headers whole, stacked where they cannot fit)."""
    tasks = sorted({t for s in summary["sessions"] for t in s["task_means"]})

    def brk(b: dict[str, Any] | None) -> str:
        if not b:
            return "—"
        return f"turn {b['turn']}" + (f" (level {b['level']})" if b.get("level") else "")

    rows: list[dict[str, Any]] = [{
        "session": short_name(s["id"]), "turns": s["agent_turns"], "stop": s["stop_reason"] or s["status"],
        **{task: s["task_means"].get(task) for task in tasks}, "consistency": s["consistency"],
        "contradictions": _fmt(s["n_contradictions"], ".1f"), "drift": s["drift_slope"], "break": brk(s["break"]),
    } for s in summary["sessions"]]
    o = summary["overall"]
    rows.append({
        "session": "overall", "turns": o["agent_turns"], "stop": f"{o['finished']}/{o['sessions']} done",
        **{task: o["task_means"].get(task) for task in tasks}, "consistency": o["consistency_mean"],
        "contradictions": _fmt(o["contradictions_mean"], ".1f"), "drift": o["drift_slope_mean"],
        "break": "—" if o["break_rate"] is None else f"{o['break_rate']:.0%}", "_total": True,
    })
    note = ""
    if o.get("turns_at_token_limit"):  # a cut reply is judged as it stands: the reader should know
        note = f"{o['turns_at_token_limit']} of {o['agent_turns']} agent turns cut at the token limit"
    return rich_table(ReportTable("Sessions (scores 1–5)", [
        Column("session", "session"), Column("turns", "turns", "int"), Column("stop", "stop"),
        *(Column(task, task, "score") for task in tasks), Column("consistency", "consistency", "score"),
        Column("contradictions", "contradictions"), Column("drift", "drift / turn", "slope"),
        Column("break", "break"),
    ], rows, note=note), turn=False)


def simulate_command(
    persona: str = typer.Option(..., "--persona", "-p", help="The persona under test, as free text."),
    model: str | None = typer.Option(
        None, "--model", "-m", help=f"Agent model spec (default {DEFAULT_AGENT})."
    ),
    agent: str | None = typer.Option(None, "--agent", help="A plug-in agent under test as module:attr."),
    user_model: str = typer.Option(DEFAULT_USER, "--user-model", help="Model spec of the simulated user."),
    user_agent: str | None = typer.Option(
        None, "--user-agent", help="A plug-in simulated user as module:attr."
    ),
    user_persona: str | None = typer.Option(
        None,
        "--user-persona",
        help="The simulated user's persona (default: one per session from a built-in list).",
    ),
    scenario: str | None = typer.Option(
        None,
        "--scenario",
        help="The situation/goal of the conversation (default: one per session from the environment pool).",
    ),
    turns: int = typer.Option(
        4, "--turns", "-t", min=1, max=200, help="Agent replies per session (at most)."
    ),
    min_turns: int = typer.Option(
        1, "--min-turns", min=1, max=200,
        help="Agent replies a session needs to count; one that ends with fewer is incomplete (exit 3).",
    ),
    adversarial: bool = typer.Option(
        False,
        "--adversarial",
        help="The user escalates attempts to break "
        "character: level 1 off-topic, 2 'are you an AI?', 3 sustained pressure.",
    ),
    judge: list[str] = typer.Option(
        [], "--judge", "-j", help=f"Judge model (repeatable; default {DEFAULT_JUDGE})."
    ),
    no_judge: bool = typer.Option(False, "--no-judge", help="Run the conversations without judges."),
    sessions: int = typer.Option(1, "--sessions", "-k", min=1, max=10_000, help="Sessions to run."),
    concurrency: int = typer.Option(8, min=1, max=MAX_CONCURRENCY,
                                    help="Sessions in flight and requests per endpoint."),
    run_dir: Path = typer.Option(
        Path("runs/simulate"), "--run-dir", help="Where results go; reuse it to resume."
    ),
    checkpoint_url: str | None = typer.Option(
        None,
        "--checkpoint-url",
        help="postgresql://… to checkpoint sessions in Postgres (default: SQLite in the run directory).",
    ),
    seed: int = typer.Option(0, help="Seed for sampling and the default user personas/scenarios."),
    max_agent_tokens: int | None = typer.Option(
        None, "--max-agent-tokens", "--max-tokens", min=8, max=8192,
        help=f"Longest agent reply, in tokens (default {default_of(SimulateConfig, 'max_agent_tokens')}).",
    ),
    max_user_tokens: int | None = typer.Option(
        None, "--max-user-tokens", min=8, max=8192,
        help=f"Longest simulated-user message (default {default_of(SimulateConfig, 'max_user_tokens')}).",
    ),
    max_judge_tokens: int | None = typer.Option(
        None, "--max-judge-tokens", min=16, max=8192,
        help=f"Reply budget of a turn verdict (default {default_of(SimulateConfig, 'max_judge_tokens')}).",
    ),
    max_verdict_tokens: int | None = typer.Option(
        None, "--max-verdict-tokens", min=16, max=8192,
        help="Reply budget of the session verdict "
        f"(default {default_of(SimulateConfig, 'max_verdict_tokens')}).",
    ),
    agent_temperature: float | None = typer.Option(
        None, "--agent-temperature", min=0, max=2,
        help="Sampling temperature of the agent "
        f"(default {default_of(SimulateConfig, 'agent_temperature')}).",
    ),
    user_temperature: float | None = typer.Option(
        None, "--user-temperature", min=0, max=2,
        help="Sampling temperature of the simulated user "
        f"(default {default_of(SimulateConfig, 'user_temperature')}).",
    ),
    allow_self_judging: bool = typer.Option(
        False, "--allow-self-judging", help="Let a model judge its own turns."
    ),
    retry_failed: bool = RETRY_FAILED_OPTION,
    base_url: str | None = BASE_URL_OPTION,
    api_key: str | None = API_KEY_OPTION,
    endpoint: list[str] = ENDPOINT_OPTION,
    timeout: float = TIMEOUT_OPTION,
) -> None:
    """Simulate multi-turn conversations with a persona agent and judge every turn and each session."""

    async def body() -> SimulateSummary:
        if model and agent:
            raise PersonagraphError("give either --model or --agent, not both")
        if user_model != DEFAULT_USER and user_agent:
            raise PersonagraphError("give either --user-model or --user-agent, not both")
        if no_judge and judge:
            raise PersonagraphError("give either --judge or --no-judge, not both")
        budgets = {"max_agent_tokens": max_agent_tokens, "max_user_tokens": max_user_tokens,
                   "max_judge_tokens": max_judge_tokens, "max_verdict_tokens": max_verdict_tokens,
                   "agent_temperature": agent_temperature, "user_temperature": user_temperature}
        config = make_config(
            SimulateConfig,
            **{name: value for name, value in budgets.items() if value is not None},
            persona=persona,
            model=model,
            agent=agent,
            user_model=user_model,
            user_agent=user_agent,
            user_persona=user_persona or None,
            scenario=scenario or None,
            turns=turns,
            min_turns=min_turns,
            adversarial=adversarial,
            judges=[] if no_judge else (judge or [DEFAULT_JUDGE]),
            sessions=sessions,
            concurrency=concurrency,
            seed=seed,
            allow_self_judging=allow_self_judging,
            retry_failed=retry_failed,
        )
        settings = model_settings(base_url, api_key, endpoint, timeout_s=timeout)
        specs = session_specs(config)
        with progress_display(label_width=24) as progress:
            overall = progress.add_task("sessions", total=len(specs))
            all_turns = progress.add_task("turns", total=len(specs) * config.turns)
            bars = (
                {
                    s.id: progress.add_task(f"  session {short_name(s.id)}", total=config.turns)
                    for s in specs[:MAX_SESSION_BARS]
                }
                if len(specs) > 1
                else {}
            )
            done_turns: dict[str, int] = {}

            def on_event(kind: str, payload: dict[str, Any]) -> None:
                if kind == "agent_turn":
                    sid = payload["session_id"]
                    done_turns[sid] = done_turns.get(sid, 0) + 1
                    progress.advance(all_turns)
                    if sid in bars:
                        progress.advance(bars[sid])
                elif kind == "session_done":
                    sid = payload["id"]
                    n_turns = sum(e["role"] == "assistant" for e in payload["turns"])
                    # early stops and sessions finished in an earlier run complete their bars
                    progress.advance(all_turns, config.turns - done_turns.get(sid, 0))
                    if sid in bars:
                        progress.update(
                            bars[sid],
                            completed=config.turns,
                            description=f"  {short_name(sid)} {payload['stop_reason'] or ''}"[:22],
                        )
                    progress.advance(overall)
                    done_turns[sid] = n_turns

            summary = await run_simulate(
                config, run_dir, settings=settings, checkpoint_url=checkpoint_url, on_event=on_event
            )
        console.print(render_sessions(summary.model_dump()))
        if (validity := validity_text(summary.model_dump())) is not None:
            console.print(validity, soft_wrap=True)
        o = summary.overall
        line = (
            f"LLM calls this run: {summary.llm_calls} · cache hits: {summary.cache_hits} · "
            f"sessions finished: {o['finished']}/{o['sessions']}"
        )
        if summary.skipped_judges:
            line += f" · skipped self-judges: {', '.join(summary.skipped_judges)}"
        console.print(line)
        console.print(f"transcripts: {run_dir}/transcripts/ · scores: {run_dir}/summary.json")
        return summary

    run(body)


def register(app: typer.Typer) -> None:
    app.command("simulate")(simulate_command)
