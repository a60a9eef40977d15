"""``personagraph eval``: PersonaGym evaluation of personas × models, with progress and a summary table."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import typer
from rich.text import Text

from personagraph.cli._common import (
    API_KEY_OPTION,
    BASE_URL_OPTION,
    ENDPOINT_OPTION,
    JUDGE_PROTOCOL_OPTION,
    RETRY_FAILED_OPTION,
    RETRY_PERMANENT_OPTION,
    TIMEOUT_OPTION,
    console,
    default_of,
    err_console,
    model_settings,
    progress_bars,
    progress_display,
    run,
)
from personagraph.cli.judge_check import protocol_line
from personagraph.environments.benchmark import load_benchmark
from personagraph.errors import PersonagraphError
from personagraph.models.settings import MAX_CONCURRENCY
from personagraph.personas import load_personas
from personagraph.report.sections import control_lines, controls_table, samples_table
from personagraph.report.view import render_summary, rich_table, validity_text
from personagraph.runs.base import make_config
from personagraph.runs.eval import DEFAULT_JUDGE, DEFAULT_MODEL, QUICK, EvalConfig, EvalSummary
from personagraph.runs.eval import run as run_eval
from personagraph.terminal import plain


def eval_command(
    persona: list[str] = typer.Option([], "--persona", help="A persona as free text (repeatable)."),
    personas: Path | None = typer.Option(None, "--personas", help="A persona file: .txt, .jsonl or .yaml."),
    benchmark: Path | None = typer.Option(None, "--benchmark", help="A static benchmark directory: "
                                          "one <persona>.json per persona mapping task → questions."),
    model: list[str] = typer.Option([], "--model", "-m", help=f"Model under test (repeatable; default {DEFAULT_MODEL})."),
    agent: list[str] = typer.Option([], "--agent", help="A plug-in agent under test as module:attr (repeatable; "
                                    "the same as --model module:attr)."),
    judge: list[str] = typer.Option([], "--judge", "-j", help=f"Judge model (repeatable; default {DEFAULT_JUDGE})."),
    generator: str | None = typer.Option(None, help="Model that selects environments and writes questions "
                                         "and exemplars (default: the first judge)."),
    environments: int | None = typer.Option(None, "--environments", min=1, max=50, help="Environments per persona (default 5)."),
    questions_per_task: int | None = typer.Option(None, "--questions-per-task", min=1, max=50, help="Questions per task (default 2)."),
    shortlist: int | None = typer.Option(None, "--shortlist", min=0, max=1000, help="Show the selector only the N pool "
                                         "environments nearest the persona by embedding (default 0: the whole "
                                         "pool; helps small selector models). N up to --environments: no "
                                         "selector, the nearest are taken."),
    persona_temperature: float | None = typer.Option(
        None, "--persona-temperature", min=0, max=2,
        help="Sampling temperature of the agents' answers "
        f"(default {default_of(EvalConfig, 'persona_temperature')})."),
    max_answer_tokens: int | None = typer.Option(
        None, "--max-answer-tokens", min=16, max=8192,
        help=f"Longest answer, in tokens (default {default_of(EvalConfig, 'max_answer_tokens')})."),
    brief_answers: bool | None = typer.Option(
        None, "--brief-answers/--full-answers",
        help="Ask model agents for two or three sentences, so answers end within a short --max-answer-tokens "
             "(on with --quick)."),
    concurrency: int = typer.Option(8, min=1, max=MAX_CONCURRENCY,
                                    help="Personas in flight and requests per model endpoint."),
    run_dir: Path = typer.Option(Path("runs/eval"), "--run-dir", help="Where results go; reuse it to resume."),
    seed: int = typer.Option(0, help="Seed for sampling and statistics."),
    quick: bool = typer.Option(False, "--quick", help=f"Small run: {QUICK['environments']} environments from a "
                               f"shortlist of {QUICK['shortlist']}, {QUICK['questions_per_task']} question per task, "
                               f"brief answers of at most {QUICK['max_answer_tokens']} tokens, 1 judge "
                               "(flags given explicitly win)."),
    allow_self_judging: bool = typer.Option(False, "--allow-self-judging", help="Let a model judge its own answers."),
    retry_failed: bool = RETRY_FAILED_OPTION,
    retry_permanent: bool = RETRY_PERMANENT_OPTION,
    non_answers: str = typer.Option("minimum", "--non-answers", help="Failed or empty answers: 'minimum' scores "
                                    "them the rubric's lowest score (counted), 'exclude' leaves them out."),
    judge_check: int = typer.Option(0, "--judge-check", min=0, max=1000, help="Then check the judges on N answers per task "
                                    "(persona swap, AI disclosure, …; see judge-check); 0: off."),
    judge_protocol: str | None = JUDGE_PROTOCOL_OPTION,
    score_kind: str = typer.Option("expected", "--score-kind", help="Scores from 'expected' (probability-"
                                   "weighted, where every verdict has logprobs) or 'integer' verdict scores."),
    samples: int = typer.Option(1, "--samples", min=1, max=100, help="Answer every question K times per agent, "
                                "each with its own seed: the CI covers questions and samples, with the "
                                "per-question spread and pass^K per task."),
    pass_threshold: float = typer.Option(4, "--pass-threshold", min=1, max=5, help="pass^K counts a question "
                                         "when all K of its answers score at least this."),
    controls: bool = typer.Option(False, "--controls", help="Also answer with control arms (each agent as a "
                                  "generic assistant and playing a contrasting persona, and a fixed refusal) and "
                                  "flag the judges when they do not score the contrast and refusal arms clearly "
                                  "below the agent."),
    base_url: str | None = BASE_URL_OPTION,
    api_key: str | None = API_KEY_OPTION,
    endpoint: list[str] = ENDPOINT_OPTION,
    timeout: float = TIMEOUT_OPTION,
    executor: str = typer.Option("local", "--executor", help="Where persona units run: local (asyncio, "
                                 "this process) or ray (Ray tasks; needs personagraph[ray])."),
    ray_address: str | None = typer.Option(None, "--ray-address", help="Ray cluster to join with --executor ray "
                                           "(e.g. ray://head:10001 or auto; default: start Ray on this machine)."),
) -> None:
    """Evaluate how faithfully agents hold personas (PersonaGym), with an ensemble of judges."""

    async def body() -> EvalSummary:
        sources = sum(bool(x) for x in (persona, personas, benchmark))
        if sources != 1:
            raise PersonagraphError("give exactly one of --persona, --personas FILE or --benchmark DIR")
        fields: dict[str, Any] = {"personas": [text for text in persona if text.strip()]}
        if benchmark:
            loaded = load_benchmark(benchmark)
            fields["personas"] = [p for p, _ in loaded]
            fields["benchmark"] = {p.description: questions for p, questions in loaded}
        elif personas:  # on a thread: a signal is acted on while a large file is read
            fields["personas"] = await asyncio.to_thread(load_personas, personas)
        elif not fields["personas"]:
            raise PersonagraphError("--persona: empty")
        options = {"models": model + agent or None, "judges": judge or None, "generator": generator,
                   "environments": environments, "questions_per_task": questions_per_task,
                   "shortlist": shortlist,
                   "persona_temperature": persona_temperature, "max_answer_tokens": max_answer_tokens,
                   "brief_answers": brief_answers}
        fields |= {name: value for name, value in options.items() if value is not None}
        config = make_config(EvalConfig, **fields, concurrency=concurrency, seed=seed, quick=quick,
                             allow_self_judging=allow_self_judging, retry_failed=retry_failed,
                             retry_permanent=retry_permanent,
                             non_answers=non_answers, judge_check=judge_check, judge_protocol=judge_protocol,
                             score_kind=score_kind, controls=controls, samples=samples,
                             pass_threshold=pass_threshold)
        with progress_display() as progress:
            summary = await run_eval(config, run_dir, settings=model_settings(base_url, api_key, endpoint, timeout_s=timeout),
                                     on_progress=progress_bars(progress), executor=executor,
                                     ray_address=ray_address)
        if summary.complete and not summary.llm_calls and not summary.cache_hits:  # no unit ran again
            err_console.print(plain(f"{run_dir} was complete: every item was reused, nothing was asked again"),
                              soft_wrap=True)
        shown = summary.model_dump()
        console.print(render_summary(shown))
        if (validity := validity_text(shown)) is not None:
            console.print(validity, soft_wrap=True)
        if (table := samples_table(shown)) is not None:
            console.print(rich_table(table))
        if (table := controls_table(shown)) is not None:
            console.print(rich_table(table))
            for line, warn in control_lines(shown):
                console.print(Text(("⚠ " if warn else "") + line, style="bold red" if warn else "green"))
        if summary.answers_not_asked:
            console.print(plain(f"scored {config.samples} sample(s) per question; {summary.answers_not_asked} "
                                "stored answers of further samples (an earlier run's --samples) are kept, not "
                                "scored"), soft_wrap=True)
        if check := shown.get("judge_check"):
            console.print(plain(protocol_line(check.get("protocols") or {})), soft_wrap=True)
        console.print(plain(
            f"LLM calls this run: {summary.llm_calls} · cache hits: {summary.cache_hits} · "
            f"failed items: {len(summary.failures)} · incomplete personas: {summary.incomplete} · "
            + (f"short of the requested count: {len(summary.shortfalls)} · " if summary.shortfalls else "")
            + f"personas finished: {summary.personas_finished}/{summary.personas} · results: {run_dir}/summary.json"
        ), soft_wrap=True)
        return summary

    previous = _fast_event_loop()
    try:
        run(body)
    finally:
        asyncio.set_event_loop_policy(previous)


def _fast_event_loop() -> asyncio.AbstractEventLoopPolicy:
    """Uses uvloop when it is installed (less framework CPU per call at high concurrency:
    ``bench/throughput.py``); returns the policy to restore afterwards."""
    previous = asyncio.get_event_loop_policy()
    try:
        import uvloop
    except ImportError:
        return previous
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return previous


def register(app: typer.Typer) -> None:
    app.command("eval")(eval_command)
