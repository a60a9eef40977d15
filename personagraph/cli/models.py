"""``personagraph models``: the model specs personagraph knows and the state of the embedded ones."""

from __future__ import annotations

import typer
from rich.table import Table

from personagraph.cli._common import console, run
from personagraph.models import LOCAL_MODELS
from personagraph.models.engine import is_built, server_path
from personagraph.models.weights import cache_dir, gguf_path, is_installed
from personagraph.terminal import key_column


def models() -> None:
    """List known model specs, and which embedded models are installed and assembled in the cache."""

    def body() -> None:
        rows = [
            (f"local:{model.name}", "yes" if is_installed(model) else "no",
             "yes" if (path := gguf_path(model)).is_file() and path.stat().st_size == model.size else "no",
             model.description)
            for model in LOCAL_MODELS.values()
        ]
        rows += [("openai:<model>", "-", "-", "any OpenAI-compatible endpoint (--base-url, --api-key)"),
                 ("test:<name>", "-", "-", "deterministic test model (tests only)")]
        table = Table(title="Model specs", caption_justify="left")
        key_column(table, "spec", (row[0] for row in rows))
        for column in ("installed", "cached", "about"):
            table.add_column(column, overflow="fold")
        for row in rows:
            table.add_row(*row)
        state = "built" if is_built() else "not built; run: bash scripts/build_llama_server.sh"
        table.caption = (f"weights cache: {cache_dir()} · local: models run on llama.cpp's server "
                         f"{server_path()} ({state})")
        console.print(table)

    run(body)


def register(app: typer.Typer) -> None:
    app.command("models")(models)
