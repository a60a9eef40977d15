"""``personagraph chat``: a human plays the user in the terminal; the transcript is saved for judging."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.text import Text

from personagraph.agents import PersonaAgent
from personagraph.agents.user_sim import QUIT_WORDS, HumanUser, UserView
from personagraph.cli._common import (
    API_KEY_OPTION,
    BASE_URL_OPTION,
    ENDPOINT_OPTION,
    TIMEOUT_OPTION,
    console,
    cut_off_note,
    model_settings,
    run,
)
from personagraph.errors import PersonagraphError
from personagraph.files import lone_surrogate
from personagraph.models import ModelClient
from personagraph.runs.plugins import load_plugins
from personagraph.runs.simulate import DEFAULT_AGENT, chat
from personagraph.terminal import plain


def chat_command(
    persona: str = typer.Option(..., "--persona", "-p", help="The persona the agent plays, as free text."),
    model: str | None = typer.Option(
        None, "--model", "-m", help=f"Agent model spec (default {DEFAULT_AGENT})."
    ),
    agent: str | None = typer.Option(None, "--agent", help="A plug-in agent as module:attr."),
    turns: int = typer.Option(
        50, "--turns", "-t", min=1, max=1000, help="Longest conversation, in agent replies."
    ),
    run_dir: Path = typer.Option(Path("runs/chat"), "--run-dir", help="Where the transcript goes."),
    temperature: float = typer.Option(0.7, min=0.0, max=2.0, help="Sampling temperature of the agent."),
    max_tokens: int = typer.Option(256, "--max-tokens", min=8, max=8192, help="Longest reply, in tokens."),
    base_url: str | None = BASE_URL_OPTION,
    api_key: str | None = API_KEY_OPTION,
    endpoint: list[str] = ENDPOINT_OPTION,
    timeout: float = TIMEOUT_OPTION,
) -> None:
    """Chat with a persona agent yourself; the transcript is saved (judge it with `judge-session`)."""

    async def body() -> None:
        if model and agent:
            raise PersonagraphError("give either --model or --agent, not both")
        if agent:
            the_agent: Any = load_plugins([agent])[0]
        else:
            settings = model_settings(base_url, api_key, endpoint, timeout_s=timeout, temperature=temperature, max_tokens=max_tokens)
            the_agent = PersonaAgent(ModelClient.create(model or DEFAULT_AGENT, "persona", settings=settings))

        def read(view: UserView) -> str | None:
            try:
                line = console.input("[bold green]you>[/] ")
            except EOFError:
                return None
            if lone_surrogate(line) is not None:  # bytes that are not UTF-8 (decoded with surrogateescape)
                raise PersonagraphError("stdin: not UTF-8 text; type text, or pipe a UTF-8 file")
            return line

        def on_event(kind: str, payload: dict[str, Any]) -> None:
            if kind == "agent_turn":
                if payload["status"] == "ok":
                    console.print(plain(Text("agent> ", style="bold cyan"), payload["text"]))
                else:
                    console.print(plain(Text(f"agent {payload['status']}: ", style="red"),
                                        payload.get("error") or "no reply"))
                if payload.get("at_token_limit"):
                    console.print(plain(cut_off_note(max_tokens)), style="dim")
                if payload.get("refusal_marker"):
                    console.print(plain(f"(persona break: {payload['refusal_marker']!r})", style="yellow"))

        console.print(plain(f"Chatting with {the_agent.name} as: {' '.join(persona.split())}"))
        console.print(f"Type your messages; end with {' or '.join(QUIT_WORDS[:2])} or Ctrl-D.", style="dim")
        record = await chat(persona, the_agent, HumanUser(read), run_dir, max_turns=turns, on_event=on_event)
        path = run_dir / "transcripts" / f"{record.get('id', '?')}.jsonl"
        n = sum(e["role"] == "assistant" and e["status"] == "ok" for e in record.get("turns", []))
        console.print(plain(f"{n} agent turns · stop: {record.get('stop_reason')} · transcript: {path}"),
                      soft_wrap=True)
        console.print(plain(f"judge it with: personagraph judge-session {path}", style="dim"), soft_wrap=True)

    run(body)


def register(app: typer.Typer) -> None:
    app.command("chat")(chat_command)
