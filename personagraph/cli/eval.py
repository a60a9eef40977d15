"""``personagraph eval``: PersonaGym evaluation of personas × models, with progress and a summary table."""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path

import typer
from pydantic import ValidationError

from personagraph.cli._common import (
    API_KEY_OPTION,
    BASE_URL_OPTION,
    console,
    model_settings,
    progress_display,
    run,
)
from personagraph.environments.benchmark import load_benchmark
from personagraph.errors import PersonagraphError
from personagraph.evaluate import DEFAULT_JUDGE, DEFAULT_MODEL, QUICK, RunConfig, evaluate
from personagraph.personas import load_personas
from personagraph.report.view import render_summary
from personagraph.schemas import Persona

STAGES = ("select", "questions", "answers", "exemplars", "verdicts")


def eval_command(
    persona: list[str] = typer.Option([], "--persona", help="A persona as free text (repeatable)."),
    personas: Path | None = typer.Option(None, "--personas", help="A persona file: .txt, .jsonl or .yaml."),
    benchmark: Path | None = typer.Option(None, "--benchmark", help="A static benchmark directory: "
                                          "one <persona>.json per persona mapping task → questions."),
    model: list[str] = typer.Option([], "--model", "-m", help=f"Model under test (repeatable; default {DEFAULT_MODEL})."),
    agent: list[str] = typer.Option([], "--agent", help="A plug-in agent under test as module:attr (repeatable)."),
    judge: list[str] = typer.Option([], "--judge", "-j", help=f"Judge model (repeatable; default {DEFAULT_JUDGE})."),
    generator: str | None = typer.Option(None, help="Model that selects environments and writes questions "
                                         "and exemplars (default: the first judge)."),
    environments: int | None = typer.Option(None, "--environments", min=1, help="Environments per persona (default 5)."),
    questions_per_task: int | None = typer.Option(None, "--questions-per-task", min=1, help="Questions per task (default 2)."),
    shortlist: int | None = typer.Option(None, "--shortlist", min=0, help="Show the selector only the N pool "
                                         "environments nearest the persona by embedding (default 0: the whole "
                                         "pool; helps small selector models)."),
    concurrency: int = typer.Option(8, min=1, max=1024, help="Personas in flight and requests per model endpoint."),
    run_dir: Path = typer.Option(Path("runs/eval"), "--run-dir", help="Where results go; reuse it to resume."),
    seed: int = typer.Option(0, help="Seed for sampling and statistics."),
    quick: bool = typer.Option(False, "--quick", help="Small run: 3 environments from a shortlist of 20, 1 question per task, "
                               "1 judge."),
    allow_self_judging: bool = typer.Option(False, "--allow-self-judging", help="Let a model judge its own answers."),
    base_url: str | None = BASE_URL_OPTION,
    api_key: str | None = API_KEY_OPTION,
    executor: str = typer.Option("local", "--executor", help="Where persona units run: local (asyncio, "
                                 "this process) or ray (Ray tasks; needs personagraph[ray])."),
    ray_address: str | None = typer.Option(None, "--ray-address", help="Ray cluster to join with --executor ray "
                                           "(e.g. ray://head:10001 or auto; default: start Ray on this machine)."),
) -> None:
    """Evaluate how faithfully agents hold personas (PersonaGym), with an ensemble of judges."""

    async def body() -> None:
        # Everything imported so far lives as long as the process: keep it out of the cyclic collector,
        # whose full passes over it cost more CPU than the calls themselves (measured in bench/throughput.py).
        gc.freeze()
        sources = sum(bool(x) for x in (persona, personas, benchmark))
        if sources != 1:
            raise PersonagraphError("give exactly one of --persona, --personas FILE or --benchmark DIR")
        bench = None
        if benchmark:
            loaded = load_benchmark(benchmark)
            people = [p for p, _ in loaded]
            bench = {p.description: questions for p, questions in loaded}
        elif personas:
            people = load_personas(personas)
        else:
            people = [Persona(description=text) for text in persona if text.strip()]
            if not people:
                raise PersonagraphError("--persona: empty")
        judges = judge or [DEFAULT_JUDGE]
        if quick:
            judges = judges[:1]
        from personagraph.executors import load_plugins

        plugins = load_plugins(agent)  # loaded once per process: evaluate() and the local executor reuse them
        models = model or ([] if plugins else [DEFAULT_MODEL])
        try:
            config = RunConfig(
                personas=people, benchmark=bench, models=models + [p.name for p in plugins], judges=judges,
                generator=generator,
                environments=environments or (QUICK["environments"] if quick else 5),
                questions_per_task=questions_per_task or (QUICK["questions_per_task"] if quick else 2),
                shortlist=shortlist if shortlist is not None else (QUICK["shortlist"] if quick else 0),
                concurrency=concurrency, seed=seed, allow_self_judging=allow_self_judging,
            )
        except ValidationError as exc:
            first = exc.errors()[0]
            option = "--" + str(first["loc"][0]).replace("_", "-") if first["loc"] else "options"
            raise PersonagraphError(f"{option}: {first['msg']}") from None
        settings = model_settings(base_url, api_key)
        agents = [p.name for p in plugins] or None  # by path, so that any executor can load them
        n_tasks = 5
        per_persona = {p.description: sum(len(v) for v in bench[p.description].values()) for p in people} if bench \
            else {p.description: n_tasks * config.questions_per_task for p in people}
        questions = sum(per_persona.values())
        totals = {
            "select": 0 if bench else len(people),
            "questions": 0 if bench else len(people) * n_tasks,
            "answers": questions * len(config.models),
            "exemplars": questions,
            "verdicts": questions * len(config.models) * len(config.judges),
        }
        with progress_display() as progress:
            bars = {stage: progress.add_task(stage, total=totals[stage] or None) for stage in STAGES
                    if totals[stage]}

            def on_item(stage: str) -> None:
                if stage in bars:
                    progress.advance(bars[stage])

            summary = await evaluate(config, run_dir, settings=settings, agents=agents, on_item=on_item,
                                     executor=executor, ray_address=ray_address)
        console.print(render_summary(summary))
        console.print(
            f"LLM calls this run: {summary['llm_calls']} · cache hits: {summary['cache_hits']} · "
            f"failed verdicts: {summary['failed_verdicts']} · personas finished: "
            f"{summary['personas_finished']}/{summary['personas']} · results: {run_dir}/summary.json"
        )

    previous = _fast_event_loop()
    try:
        run(body)
    finally:
        asyncio.set_event_loop_policy(previous)


def _fast_event_loop() -> asyncio.AbstractEventLoopPolicy:
    """Uses uvloop when it is installed (bench/throughput.py at C = 128: framework CPU per call 2.1 →
    1.8 ms, wall −20%); returns the policy to restore afterwards."""
    previous = asyncio.get_event_loop_policy()
    try:
        import uvloop
    except ImportError:
        return previous
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return previous


def register(app: typer.Typer) -> None:
    app.command("eval")(eval_command)
