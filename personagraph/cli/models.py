"""``personagraph models``: the model specs personagraph knows and the state of the embedded ones."""

from __future__ import annotations

import typer
from rich.table import Table

from personagraph.cli._common import console, run
from personagraph.models import LOCAL_MODELS
from personagraph.models.weights import gguf_path, is_installed


def models() -> None:
    """List known model specs, and which embedded models are installed and assembled in the cache."""

    def body() -> None:
        table = Table(title="Model specs")
        for column in ("spec", "installed", "cached weights", "about"):
            table.add_column(column)
        for model in LOCAL_MODELS.values():
            path = gguf_path(model)
            cached = str(path) if path.is_file() and path.stat().st_size == model.size else "no"
            table.add_row(f"local:{model.name}", "yes" if is_installed(model) else "no", cached, model.description)
        table.add_row("openai:<model>", "-", "-", "any OpenAI-compatible endpoint (--base-url, --api-key)")
        table.add_row("test:<name>", "-", "-", "deterministic test model (tests only)")
        console.print(table)

    run(body)


def register(app: typer.Typer) -> None:
    app.command("models")(models)
