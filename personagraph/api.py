"""The Python API: one verb per run kind, sync by default, each with an ``a``-prefixed async twin.

    from personagraph import evaluate
    summary = evaluate("A 70-year-old retired cowboy from Texas", models=["local:qwen2.5-coder-0.5b"])
    print(summary.models["local:qwen2.5-coder-0.5b"]["persona_score"])

Arguments are the run kind's config fields under the same names as the CLI's flags (``--questions-per-task``
is ``questions_per_task=``), plus where to run (``run_dir``), the endpoint (``base_url``, ``api_key``, ``timeout``: seconds per request) and a
progress callback: without one, a sync verb draws a bar per stage (``tqdm.auto``: widgets in a notebook,
text on stderr elsewhere). An interrupt (Ctrl-C, a notebook's Stop button) stops a verb within moments;
the same call on the same ``run_dir`` resumes it.
``models`` takes model specs, ``module:attr`` plug-in paths and agent objects in one
list, ``judges`` the same with judge objects. A bad argument is a
:class:`~personagraph.errors.PersonagraphError` naming it.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, ParamSpec, TypeVar

from personagraph.agents import Agent
from personagraph.judges.base import Judge
from personagraph.judges.meta_eval import MetaEvalConfig
from personagraph.metrics.behavior import BehaviorConfig
from personagraph.metrics.longlamp import LongLaMPConfig
from personagraph.metrics.persobench import PersoBenchConfig
from personagraph.models import Endpoint, ModelSettings
from personagraph.runs import behavior as behavior_run
from personagraph.runs import eval as eval_run
from personagraph.runs import judge_check as judge_check_run
from personagraph.runs import longlamp as longlamp_run
from personagraph.runs import meta_eval as meta_eval_run
from personagraph.runs import persobench as persobench_run
from personagraph.runs import simulate as simulate_run
from personagraph.runs.base import ConfigError, ProgressEvent, ProgressHandler, make_config, synchronous
from personagraph.runs.plugins import (
    Given,
    as_agent,
    is_plugin_path,
    object_name,
    split_judge_objects,
    split_models,
)
from personagraph.schemas import Persona

P = ParamSpec("P")
T = TypeVar("T")


class ProgressBars:
    """A run's progress as one ``tqdm.auto`` bar per stage (``answers``, ``verdicts``, …): widgets in a
    notebook, text on stderr elsewhere, as ``datasets`` and ``langsmith.evaluate`` draw theirs. Use it as
    ``on_progress`` inside ``with``; the bars close at the end."""

    def __init__(self) -> None:
        self._bars: dict[str, Any] = {}

    def __call__(self, event: ProgressEvent) -> None:
        from tqdm.auto import tqdm  # picks the notebook's widgets, which the terminal does not need at import

        bar = self._bars.get(event.stage)
        if bar is None:
            bar = self._bars[event.stage] = tqdm(total=event.total, desc=event.stage, unit="item", leave=True,
                                                 dynamic_ncols=True)
        label = f"{event.stage} ({event.reused} reused)" if event.reused else event.stage
        if bar.desc != label:
            bar.set_description_str(label, refresh=False)
        bar.total = event.total
        bar.update(event.done - bar.n)

    def __enter__(self) -> ProgressBars:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
                 ) -> None:
        for bar in self._bars.values():
            bar.close()


def _drawn(func: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, Coroutine[Any, Any, T]]:
    """``func`` (an async verb taking ``on_progress``) drawing :class:`ProgressBars` when it is given none."""

    @functools.wraps(func)
    async def drawn(*args: P.args, **kwargs: P.kwargs) -> T:
        if kwargs.get("on_progress") is not None:
            return await func(*args, **kwargs)
        with ProgressBars() as bars:
            kwargs["on_progress"] = bars
            return await func(*args, **kwargs)

    return drawn


def verb(func: Callable[P, Coroutine[Any, Any, T]], name: str) -> Callable[P, T]:
    """The sync verb of an async one: the same arguments, progress bars by default (:class:`ProgressBars`)
    when it reports progress, stopped by an interrupt (:func:`~personagraph.runs.base.synchronous`)."""
    takes_progress = "on_progress" in inspect.signature(func).parameters
    return synchronous(_drawn(func) if takes_progress else func, name)


def settings_for(
    base_url: str | None, api_key: str | None, endpoints: Sequence[str | Endpoint] = (),
    timeout: float | None = None, **fields: Any
) -> ModelSettings:
    """Endpoint settings shared by a run's roles (``None``: the environment's ``OPENAI_*``); ``timeout``: the
    seconds one request to an API endpoint may take (None: the default); ``fields``: other
    :class:`~personagraph.models.ModelSettings` fields (``concurrency``)."""
    if timeout is not None:
        fields["timeout_s"] = timeout
    try:
        return make_config(ModelSettings, base_url=base_url, api_key=api_key, endpoints=list(endpoints),
                           **fields)
    except ConfigError as exc:
        raise ConfigError("timeout", exc.reason) if exc.field == "timeout_s" else exc from None


async def aevaluate(
    personas: str | Persona | Sequence[str | Persona],
    *,
    models: Given | None = None,
    judges: Given | None = None,
    run_dir: str | Path = "runs/eval",
    base_url: str | None = None,
    api_key: str | None = None,
    endpoints: Sequence[str | Endpoint] = (),
    timeout: float | None = None,
    executor: str = "local",
    ray_address: str | None = None,
    on_progress: ProgressHandler | None = None,
    **options: Any,
) -> eval_run.EvalSummary:
    """Evaluates how faithfully agents hold personas (PersonaGym) and returns the run's summary.

    Args:
        personas: persona descriptions (plain strings) or :class:`Persona` objects; one or many.
        models: the agents under test: model specs (``local:qwen2.5-coder-0.5b``), plug-in paths
            (``module:attr``) and agent objects (an :class:`~personagraph.agents.Agent`, a chat model,
            a Runnable, a function ``(messages) -> str``, a compiled graph), named by their
            ``with_config(run_name=…)``, ``compile(name=…)`` or ``name``; ``{name: agent}`` entries
            (or one such mapping) name objects explicitly; default: the embedded 0.5B.
        judges: the judges: model specs, plug-in paths and judge objects (a
            :class:`~personagraph.judges.base.Judge`, or anything ``models`` takes: its reply is read as
            the verdict's JSON); default: the embedded 1.5B.
        run_dir: where results go; the same directory resumes the run.
        base_url, api_key: the OpenAI-compatible endpoint for ``openai:`` specs.
        timeout: seconds one request to an API endpoint may take before it is retried (default 60).
        endpoints: named endpoints for ``openai@NAME:model`` specs, as :class:`~personagraph.models.Endpoint`
            objects or ``NAME=URL[,key-env=VAR][,concurrency=N]`` strings (the CLI's ``--endpoint``).
        executor, ray_address: where persona units run (``local`` or ``ray``).
        on_progress: receives a :class:`~personagraph.runs.base.ProgressEvent` per finished item.
        **options: any other :class:`~personagraph.runs.eval.EvalConfig` field (``quick``,
            ``environments``, ``questions_per_task``, ``shortlist``, ``benchmark``, ``seed``, …).
    """
    fields: dict[str, Any] = dict(options, personas=personas)
    agents: list[Agent] = []
    judge_objects: list[Judge] = []
    if models is not None:
        fields["models"], agents = split_models(models)
    if judges is not None:
        fields["judges"], judge_objects = split_judge_objects(judges)
    config = make_config(eval_run.EvalConfig, **fields)
    return await eval_run.run(
        config,
        run_dir,
        settings=settings_for(base_url, api_key, endpoints, timeout),
        agents=agents,
        judge_objects=judge_objects,
        on_progress=on_progress,
        executor=executor,
        ray_address=ray_address,
    )


evaluate = verb(aevaluate, "evaluate")


async def asimulate(
    persona: str | Persona,
    *,
    model: Any = None,
    judges: Given | None = None,
    run_dir: str | Path = "runs/simulate",
    base_url: str | None = None,
    api_key: str | None = None,
    endpoints: Sequence[str | Endpoint] = (),
    timeout: float | None = None,
    checkpoint_url: str | None = None,
    on_event: simulate_run.EventHook | None = None,
    **options: Any,
) -> simulate_run.SimulateSummary:
    """Runs multi-turn sessions between a simulated user and the agent, judged turn by turn.

    Args:
        persona: the persona the agent plays: a description or a :class:`Persona`.
        model: the agent under test: a model spec, a ``module:attr`` plug-in path or an agent object
            (default: the embedded 0.5B).
        judges: model specs, plug-in paths and judge objects, as :func:`aevaluate` takes them (``[]``: no
            judging).
        **options: any other :class:`~personagraph.runs.simulate.SimulateConfig` field (``turns``,
            ``sessions``, ``adversarial``, ``user_model``, ``scenario``, …).
    """
    description = persona.description if isinstance(persona, Persona) else persona
    fields: dict[str, Any] = dict(options, persona=description)
    agent: Agent | None = None
    judge_objects: list[Judge] = []
    if isinstance(model, str):
        fields["agent" if is_plugin_path(model) else "model"] = model
    elif model is not None:
        agent = as_agent(model, object_name(model))
        fields["model"] = agent.name
    if judges is not None:
        fields["judges"], judge_objects = split_judge_objects(judges)
    config = make_config(simulate_run.SimulateConfig, **fields)
    return await simulate_run.run(
        config,
        run_dir,
        settings=settings_for(base_url, api_key, endpoints, timeout),
        agent=agent,
        judge_objects=judge_objects,
        checkpoint_url=checkpoint_url,
        on_event=on_event,
    )


async def ajudge_session(
    transcript: str | Path,
    *,
    judges: Given | None = None,
    persona: str | Persona | None = None,
    run_dir: str | Path = "runs/judge-session",
    allow_self_judging: bool = False,
    base_url: str | None = None,
    api_key: str | None = None,
    endpoints: Sequence[str | Endpoint] = (),
    timeout: float | None = None,
    on_progress: ProgressHandler | None = None,
) -> simulate_run.SimulateSummary:
    """Judges a saved session (``chat``/``simulate`` transcript JSONL) turn by turn, with the session verdict,
    as ``personagraph judge-session`` does; ``judges`` as :func:`aevaluate` takes them (default: the
    embedded judge), ``persona`` overrides the transcript's."""
    names, judge_objects = split_judge_objects(judges) if judges is not None else ([], [])
    return await simulate_run.judge_session(
        transcript,
        run_dir,
        judges=names or None,
        judge_objects=judge_objects,
        persona=persona.description if isinstance(persona, Persona) else persona,
        settings=settings_for(base_url, api_key, endpoints, timeout),
        allow_self_judging=allow_self_judging,
        on_progress=on_progress,
    )


async def ameta_evaluate(
    items: str | Path | None = None,
    *,
    benchmark: str | Sequence[str] | None = None,
    judges: Given,
    run_dir: str | Path = "runs/meta-eval",
    base_url: str | None = None,
    api_key: str | None = None,
    endpoints: Sequence[str | Endpoint] = (),
    timeout: float | None = None,
    on_progress: ProgressHandler | None = None,
    **options: Any,
) -> meta_eval_run.MetaEvalSummary:
    """Meta-evaluates judges (model specs, plug-in paths and judge objects, as :func:`aevaluate` takes them)
    against human-rated items (ρ, τ, κ, MAE with CIs): an items file, or built-in benchmarks
    (``benchmark="persona"`` or names, see ``personagraph.judges.benchmarks``; a finished benchmark run saves
    each judge's validity card); ``**options`` are the other
    :class:`~personagraph.judges.meta_eval.MetaEvalConfig` fields (``benchmark_dir``, ``sample``,
    ``criteria``, …)."""
    names, judge_objects = split_judge_objects(judges)
    if benchmark is not None:
        options["benchmark"] = [benchmark] if isinstance(benchmark, str) else list(benchmark)
    config = make_config(MetaEvalConfig, **options, items=None if items is None else str(items), judges=names)
    return await meta_eval_run.run(
        config, run_dir, settings=settings_for(base_url, api_key, endpoints, timeout), judge_objects=judge_objects,
        on_progress=on_progress,
    )


async def ajudge_check(
    *,
    judges: Given | None = None,
    run_dir: str | Path = "runs/judge-check",
    base_url: str | None = None,
    api_key: str | None = None,
    endpoints: Sequence[str | Endpoint] = (),
    timeout: float | None = None,
    on_progress: ProgressHandler | None = None,
    **options: Any,
) -> judge_check_run.JudgeCheckSummary:
    """Checks judges (model specs, plug-in paths and judge objects, as :func:`aevaluate` takes them; default:
    the source's) with controlled variants of answers (from an eval run, ``from_run=``, or an items file,
    ``items=``); ``**options`` are the other :class:`~personagraph.runs.judge_check.JudgeCheckConfig`
    fields."""
    judge_objects: list[Judge] = []
    if judges is not None:
        options["judges"], judge_objects = split_judge_objects(judges)
    config = make_config(judge_check_run.JudgeCheckConfig, **options)
    return await judge_check_run.run(
        config, run_dir, settings=settings_for(base_url, api_key, endpoints, timeout), judge_objects=judge_objects,
        on_progress=on_progress,
    )


async def apersobench(
    data: str | Path,
    *,
    model: str,
    run_dir: str | Path = "runs/persobench",
    base_url: str | None = None,
    api_key: str | None = None,
    endpoints: Sequence[str | Endpoint] = (),
    timeout: float | None = None,
    concurrency: int = 8,
    on_progress: ProgressHandler | None = None,
    **options: Any,
) -> persobench_run.PersoBenchSummary:
    """Generates personalized replies for a PersoBench CSV and scores them; ``**options`` are the other
    :class:`~personagraph.metrics.persobench.PersoBenchConfig` fields (``cot``, ``limit``, ``score``, …)."""
    config = make_config(PersoBenchConfig, **options, data=data, model=model)
    settings = settings_for(base_url, api_key, endpoints, timeout, concurrency=concurrency)
    return await persobench_run.run(config, run_dir, settings=settings, on_progress=on_progress)


async def alonglamp(
    data: str | Path,
    *,
    model: str,
    run_dir: str | Path = "runs/longlamp",
    base_url: str | None = None,
    api_key: str | None = None,
    endpoints: Sequence[str | Endpoint] = (),
    timeout: float | None = None,
    concurrency: int = 8,
    on_progress: ProgressHandler | None = None,
    **options: Any,
) -> longlamp_run.LongLaMPSummary:
    """Retrieves, generates and scores LongLaMP records; ``**options`` are the other
    :class:`~personagraph.metrics.longlamp.LongLaMPConfig` fields (``retriever``, ``k``, ``limit``, …)."""
    config = make_config(LongLaMPConfig, **options, data=data, model=model)
    settings = settings_for(base_url, api_key, endpoints, timeout, concurrency=concurrency)
    return await longlamp_run.run(config, run_dir, settings=settings, on_progress=on_progress)


async def abehavior_alignment(
    dialogues: str | Path,
    *,
    run_dir: str | Path = "runs/behavior",
    base_url: str | None = None,
    api_key: str | None = None,
    endpoints: Sequence[str | Endpoint] = (),
    timeout: float | None = None,
    on_progress: ProgressHandler | None = None,
    **options: Any,
) -> behavior_run.BehaviorSummary:
    """Labels recommender strategies (κ against human labels) and the system's behavior alignment;
    ``**options`` are the other :class:`~personagraph.metrics.behavior.BehaviorConfig` fields."""
    config = make_config(BehaviorConfig, **options, dialogues=dialogues)
    return await behavior_run.run(
        config, run_dir, settings=settings_for(base_url, api_key, endpoints, timeout), on_progress=on_progress
    )


async def amemory_dialogue(
    dialogues: str | Path,
    memories: str | Path,
    *,
    run_dir: str | Path = "runs/memory-dialogue",
    on_progress: ProgressHandler | None = None,
    **options: Any,
) -> Any:
    """Memory-augmented dialogue on MADial-Bench (one setting: retrieve, respond, judge); ``**options``
    are the :class:`~personagraph.memory.dialogue_eval.DialogueEvalConfig` fields (``setting``,
    ``model``, ``judge``, ``method``, ``limit``, …). Returns its ``MemoryDialogueSummary``."""
    # Imported here, not at the top: it loads chromadb (~0.5 s), which `import personagraph` should not pay.
    from personagraph.memory.dialogue_eval import DialogueEvalConfig
    from personagraph.runs import memory_dialogue as memory_dialogue_run

    config = make_config(DialogueEvalConfig, **options)
    return await memory_dialogue_run.run(config, dialogues, memories, run_dir, on_progress=on_progress)


simulate = verb(asimulate, "simulate")
judge_session = verb(ajudge_session, "judge_session")
meta_evaluate = verb(ameta_evaluate, "meta_evaluate")
judge_check = verb(ajudge_check, "judge_check")
persobench = verb(apersobench, "persobench")
longlamp = verb(alonglamp, "longlamp")
behavior_alignment = verb(abehavior_alignment, "behavior_alignment")
memory_dialogue = verb(amemory_dialogue, "memory_dialogue")
