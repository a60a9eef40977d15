"""``personagraph ask``: one persona answer, printed."""

from __future__ import annotations

import typer

from personagraph.agents import PersonaAgent
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
from personagraph.models import DEFAULT_MODEL, ModelClient
from personagraph.personas import parse_persona
from personagraph.terminal import plain


def ask(
    question: str = typer.Argument(..., help="The question to put to the persona."),
    persona: str = typer.Option(..., "--persona", "-p", help="The persona, as free text."),
    model: str = typer.Option(DEFAULT_MODEL, "--model", "-m", help="Model spec of the persona agent."),
    temperature: float = typer.Option(0.7, min=0, max=2, help="Sampling temperature."),
    max_tokens: int = typer.Option(256, min=1, max=32768, help="Longest answer, in tokens."),
    base_url: str | None = BASE_URL_OPTION,
    api_key: str | None = API_KEY_OPTION,
    endpoint: list[str] = ENDPOINT_OPTION,
    timeout: float = TIMEOUT_OPTION,
) -> None:
    """Ask a persona agent one question and print its answer."""

    async def body() -> None:
        description = parse_persona(persona, "--persona").description
        settings = model_settings(base_url, api_key, endpoint, timeout_s=timeout, temperature=temperature, max_tokens=max_tokens)
        agent = PersonaAgent(ModelClient.create(model, "persona", settings=settings))
        with console.status(plain(f"{model} is answering…")):
            reply = await agent.respond(description,
                                        [{"role": "user", "content": question}])
        if not reply.ok:
            raise PersonagraphError(f"{model}: {reply.error}")
        console.print(plain(reply.text.strip() or "(empty answer)"))
        if reply.at_token_limit:
            console.print(plain(cut_off_note(max_tokens)), style="dim")

    run(body)


def register(app: typer.Typer) -> None:
    app.command("ask")(ask)
