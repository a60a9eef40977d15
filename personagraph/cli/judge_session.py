"""``personagraph judge-session FILE``: judges a saved transcript (from ``chat`` or ``simulate``)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from personagraph.cli._common import (
    API_KEY_OPTION,
    BASE_URL_OPTION,
    ENDPOINT_OPTION,
    TIMEOUT_OPTION,
    console,
    model_settings,
    progress_bars,
    progress_display,
    run,
)
from personagraph.cli.simulate import render_sessions
from personagraph.runs.simulate import DEFAULT_JUDGE, judge_session
from personagraph.store import RunStore
from personagraph.terminal import key_column


def judge_session_command(
    file: Path = typer.Argument(
        ..., help="A transcript JSONL (chat/simulate output, or role/content lines)."
    ),
    judge: list[str] = typer.Option(
        [], "--judge", "-j", help=f"Judge model (repeatable; default {DEFAULT_JUDGE})."
    ),
    persona: str | None = typer.Option(
        None, "--persona", "-p", help="The persona (default: from the transcript)."
    ),
    run_dir: Path = typer.Option(
        Path("runs/judge-session"), "--run-dir", help="Where the judged session goes."
    ),
    allow_self_judging: bool = typer.Option(
        False, "--allow-self-judging", help="Let a model judge its own turns."
    ),
    base_url: str | None = BASE_URL_OPTION,
    api_key: str | None = API_KEY_OPTION,
    endpoint: list[str] = ENDPOINT_OPTION,
    timeout: float = TIMEOUT_OPTION,
) -> None:
    """Score every agent turn of a saved session and give the session verdict."""

    async def body() -> None:
        with progress_display(label_width=15, transient=True) as progress:
            summary = await judge_session(
                file,
                run_dir,
                judges=judge or [DEFAULT_JUDGE],
                persona=persona,
                settings=model_settings(base_url, api_key, endpoint, timeout_s=timeout),
                allow_self_judging=allow_self_judging,
                on_progress=progress_bars(progress),
            )
        store = RunStore(run_dir, readonly=True)
        try:
            record = store.get("session", summary.sessions[0]["id"])
        finally:
            store.close()
        table = Table(title="Agent turns")
        table.add_column("turn", justify="right")
        key_column(table, "judge", (name for e in record["turns"] for name in e.get("scores") or {"—": {}}))
        tasks = sorted({t for e in record["turns"] for s in (e.get("scores") or {}).values() for t in s})
        for task in tasks:
            table.add_column(task, justify="right")
        table.add_column("persona break")
        for entry in record["turns"]:
            if entry["role"] != "assistant":
                continue
            scores = entry.get("scores") or {"—": {}}
            for name, by_task in scores.items():
                table.add_row(
                    str(entry["index"]),
                    name,
                    *("—" if by_task.get(t) is None else str(by_task[t]) for t in tasks),
                    entry.get("refusal_marker") or "",
                )
        console.print(table)
        console.print(render_sessions(summary.model_dump()))
        console.print(
            f"judged session: {run_dir}/transcripts/{record['id']}.md · scores: {run_dir}/summary.json"
        )

    run(body)


def register(app: typer.Typer) -> None:
    app.command("judge-session")(judge_session_command)
