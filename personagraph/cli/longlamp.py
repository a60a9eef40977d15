"""``personagraph longlamp``: profile retrieval + personalized long-form generation, scored; resumable."""

from __future__ import annotations

from pathlib import Path

import typer

from personagraph.cli._common import (
    API_KEY_OPTION,
    BASE_URL_OPTION,
    ENDPOINT_OPTION,
    MAX_COUNT,
    MAX_TOKENS,
    RETRY_FAILED_OPTION,
    TIMEOUT_OPTION,
    console,
    model_settings,
    progress_bars,
    progress_display,
    run,
)
from personagraph.cli.score import EMBEDDING_OPTION, WORST_OPTION, render_report
from personagraph.errors import PersonagraphError
from personagraph.metrics.longlamp import RETRIEVERS, LongLaMPConfig, load_longlamp
from personagraph.models.settings import MAX_CONCURRENCY
from personagraph.runs.base import make_config
from personagraph.runs.longlamp import LongLaMPSummary
from personagraph.runs.longlamp import run as run_longlamp


def longlamp_command(
    data: Path = typer.Option(..., "--data", help='JSONL of {"input", "output", "profile": [{...}]} records.'),
    model: str = typer.Option(..., "--model", "-m", help="Model that writes: local:<name>, openai:<model>, test:<name>."),
    retriever: str = typer.Option("bm25", "--retriever", help=f"Profile retriever: {'|'.join(RETRIEVERS)}."),
    k: int = typer.Option(1, "--k", "-k", min=1, max=MAX_COUNT, help="Profile items put in the prompt."),
    limit: int | None = typer.Option(None, "--limit", min=1, max=MAX_COUNT, help="Only the first N records."),
    run_dir: Path = typer.Option(Path("runs/longlamp"), "--run-dir", help="Where results go; reuse it to resume."),
    seed: int = typer.Option(0, help="Seed of the random retriever."),
    max_tokens: int = typer.Option(512, "--max-tokens", min=1, max=MAX_TOKENS, help="Generation limit per text."),
    temperature: float = typer.Option(0.0, "--temperature", min=0, max=2, help="Sampling temperature."),
    embedding_model: str | None = EMBEDDING_OPTION,
    failures_as_worst: bool = WORST_OPTION,
    concurrency: int = typer.Option(8, min=1, max=MAX_CONCURRENCY,
                                    help="Requests in flight per model endpoint."),
    base_url: str | None = BASE_URL_OPTION,
    api_key: str | None = API_KEY_OPTION,
    endpoint: list[str] = ENDPOINT_OPTION,
    timeout: float = TIMEOUT_OPTION,
    retry_failed: bool = RETRY_FAILED_OPTION,
) -> None:
    """Retrieve from each user's profile, generate personalized long-form text, score ROUGE-1/L and METEOR."""

    async def body() -> LongLaMPSummary:
        if retriever not in RETRIEVERS:
            raise PersonagraphError(f"--retriever {retriever!r}: choose from {', '.join(RETRIEVERS)}")
        config = make_config(LongLaMPConfig, data=data, model=model, retriever=retriever, k=k, limit=limit,
                             seed=seed, max_tokens=max_tokens, temperature=temperature, embedding_model=embedding_model,
                             failures_as_worst=failures_as_worst, retry_failed=retry_failed)
        load_longlamp(data, limit)  # a bad file fails before any set-up
        settings = model_settings(base_url, api_key, endpoint, timeout_s=timeout, concurrency=concurrency)
        with progress_display(label_width=0, transient=True) as progress:
            summary = await run_longlamp(config, run_dir, settings=settings, on_progress=progress_bars(progress))
        console.print(f"[bold]LongLaMP · {model} · {retriever} k={k} · {summary.generated}/{summary.items} items[/bold]")
        console.print(render_report(summary.scores))
        cost = summary.cost
        mean_time = "—" if cost.mean_response_time_s is None else f"{cost.mean_response_time_s:.2f}s"
        console.print(f"empty generations {cost.failures}/{cost.n} · response time {mean_time} per item · "
                      f"LLM calls this run: {summary.llm_calls} · cache hits: {summary.cache_hits}")
        console.print(f"results: {run_dir}/longlamp_summary.json")
        return summary

    run(body)


def register(app: typer.Typer) -> None:
    app.command("longlamp")(longlamp_command)
