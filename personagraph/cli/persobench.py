"""``personagraph persobench``: personalized response generation on a PersoBench CSV, scored; resumable."""

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
from personagraph.cli.score import (
    BERTSCORE_LAYERS_OPTION,
    BERTSCORE_MODEL_OPTION,
    EMBEDDING_OPTION,
    METRICS_HELP,
    NLI_OPTION,
    ROUGE_STEMMER_OPTION,
    WORST_OPTION,
    choose_metrics,
    print_models,
    render_report,
)
from personagraph.metrics.persobench import PersoBenchConfig, load_persobench
from personagraph.metrics.scoring import ScoreConfig
from personagraph.models.settings import MAX_CONCURRENCY
from personagraph.runs.persobench import PersoBenchSummary
from personagraph.runs.persobench import run as run_persobench
from personagraph.terminal import plain


def persobench_command(
    data: Path = typer.Option(..., "--data", help="PersoBench CSV with columns personas, context, act_response."),
    model: str = typer.Option(..., "--model", "-m", help="Model under test: local:<name>, openai:<model>, test:<name>."),
    cot: bool = typer.Option(False, "--cot", help="Chain-of-thought prompting (JSON reasoning, then response)."),
    limit: int | None = typer.Option(None, "--limit", min=1, max=MAX_COUNT, help="Only the first N rows."),
    run_dir: Path = typer.Option(Path("runs/persobench"), "--run-dir", help="Where results go; reuse it to resume."),
    metrics: str | None = typer.Option(None, "--metrics", help=METRICS_HELP),
    nli_model: str | None = NLI_OPTION,
    bertscore_model: str | None = BERTSCORE_MODEL_OPTION,
    bertscore_layers: int | None = BERTSCORE_LAYERS_OPTION,
    embedding_model: str | None = EMBEDDING_OPTION,
    failures_as_worst: bool = WORST_OPTION,
    rouge_stemmer: bool = ROUGE_STEMMER_OPTION,
    max_tokens: int = typer.Option(256, "--max-tokens", min=1, max=MAX_TOKENS, help="Generation limit per reply."),
    temperature: float = typer.Option(0.0, "--temperature", min=0, max=2, help="Sampling temperature."),
    concurrency: int = typer.Option(8, min=1, max=MAX_CONCURRENCY,
                                    help="Requests in flight per model endpoint."),
    base_url: str | None = BASE_URL_OPTION,
    api_key: str | None = API_KEY_OPTION,
    endpoint: list[str] = ENDPOINT_OPTION,
    timeout: float = TIMEOUT_OPTION,
    retry_failed: bool = RETRY_FAILED_OPTION,
) -> None:
    """Generate personalized responses (vanilla or CoT) and score them: fluency, diversity, personalization."""

    async def body() -> PersoBenchSummary:
        load_persobench(data, limit)  # a bad file fails before any set-up
        chosen = choose_metrics(metrics, True, True, nli_model)
        config = PersoBenchConfig(
            data=data, model=model, cot=cot, limit=limit, max_tokens=max_tokens, temperature=temperature,
            retry_failed=retry_failed,
            score=ScoreConfig(metrics=chosen, nli_model=nli_model, bertscore_model=bertscore_model,
                              bertscore_layers=bertscore_layers, embedding_model=embedding_model,
                              failures_as_worst=failures_as_worst, rouge_stemmer=rouge_stemmer),
        )
        if not metrics and "c_score" not in chosen:
            console.print("[dim]c_score and ue_score skipped: no NLI model configured (--nli-model)[/dim]")
        settings = model_settings(base_url, api_key, endpoint, timeout_s=timeout, concurrency=concurrency)
        with progress_display(label_width=0, transient=True) as progress:
            summary = await run_persobench(config, run_dir, settings=settings, on_progress=progress_bars(progress))
        console.print(plain(f"PersoBench · {model} · {config.mode} · {summary.generated}/{summary.items} items",
                            style="bold"))
        console.print(render_report(summary.scores))
        print_models(summary.scores)
        cost = summary.cost
        mean_time = "—" if cost.mean_response_time_s is None else f"{cost.mean_response_time_s:.2f}s"
        console.print(
            f"failure ratio {cost.failure_ratio if cost.failure_ratio is None else f'{cost.failure_ratio:.3f}'} "
            f"({cost.failures}/{cost.n}) · response time {mean_time} per item · LLM calls this run: "
            f"{summary.llm_calls} · cache hits: {summary.cache_hits}"
        )
        console.print(f"results: {run_dir}/persobench_summary.json")
        return summary

    run(body)


def register(app: typer.Typer) -> None:
    app.command("persobench")(persobench_command)
