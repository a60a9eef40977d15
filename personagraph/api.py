"""The Python API: one verb per run kind, sync by default, each with an ``a``-prefixed async twin.

    from personagraph import evaluate
    summary = evaluate("A 70-year-old retired cowboy from Texas", models=["local:qwen2.5-coder-0.5b"])
    print(summary.models["local:qwen2.5-coder-0.5b"]["persona_score"])

Arguments are the run kind's config fields under the same names as the CLI's flags (``--questions-per-task``
is ``questions_per_task=``), plus where to run (``run_dir``), the endpoint (``base_url``, ``api_key``) and a
progress callback. ``models`` takes model specs, ``module:attr`` plug-in paths and agent objects in one
list. A bad argument is a :class:`~personagraph.errors.PersonagraphError` naming it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from personagraph.models import Endpoint, ModelSettings
from personagraph.runs import eval as eval_run
from personagraph.runs.base import ProgressHandler, make_config, synchronous
from personagraph.runs.plugins import split_models
from personagraph.schemas import Persona


def settings_for(base_url: str | None, api_key: str | None,
                 endpoints: Sequence[str | Endpoint] = ()) -> ModelSettings:
    """Endpoint settings shared by a run's roles (``None``: the environment's ``OPENAI_*``)."""
    return make_config(ModelSettings, base_url=base_url, api_key=api_key, endpoints=list(endpoints))


async def aevaluate(
    personas: str | Persona | Sequence[str | Persona],
    *,
    models: Sequence[Any] | None = None,
    judges: Sequence[str] | None = None,
    run_dir: str | Path = "runs/eval",
    base_url: str | None = None,
    api_key: str | None = None,
    endpoints: Sequence[str | Endpoint] = (),
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
            a Runnable, a function ``(messages) -> str``, a compiled graph); default: the embedded 0.5B.
        judges: judge model specs (default: the embedded 1.5B).
        run_dir: where results go; the same directory resumes the run.
        base_url, api_key: the OpenAI-compatible endpoint for ``openai:`` specs.
        endpoints: named endpoints for ``openai@NAME:model`` specs, as :class:`~personagraph.models.Endpoint`
            objects or ``NAME=URL[,key-env=VAR][,concurrency=N]`` strings (the CLI's ``--endpoint``).
        executor, ray_address: where persona units run (``local`` or ``ray``).
        on_progress: receives a :class:`~personagraph.runs.base.ProgressEvent` per finished item.
        **options: any other :class:`~personagraph.runs.eval.EvalConfig` field (``quick``,
            ``environments``, ``questions_per_task``, ``shortlist``, ``benchmark``, ``seed``, …).
    """
    fields: dict[str, Any] = dict(options, personas=personas)
    agents: list[Any] = []
    if models is not None:
        fields["models"], agents = split_models(models)
    if judges is not None:
        fields["judges"] = list(judges)
    config = make_config(eval_run.EvalConfig, **fields)
    return await eval_run.run(
        config,
        run_dir,
        settings=settings_for(base_url, api_key, endpoints),
        agents=agents,
        on_progress=on_progress,
        executor=executor,
        ray_address=ray_address,
    )


evaluate = synchronous(aevaluate, "evaluate")
