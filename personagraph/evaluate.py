"""``evaluate``: the PersonaGym evaluation of many personas × models, concurrent and resumable.

Each persona runs through the persona_eval graph with its own checkpoint thread; every LLM call goes
through the run store's response cache, so running the same config on the same run directory again
sends no finished call twice. ``summary.json`` is computed from the store only.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, field_validator

from personagraph import __version__
from personagraph.agents import Agent
from personagraph.errors import PersonagraphError
from personagraph.judges.scoring import summarize_scores
from personagraph.models import Meter, ModelSettings, parse_spec
from personagraph.prompts import load_prompt
from personagraph.resources import data_hash
from personagraph.schemas import Answer, Persona, Verdict
from personagraph.store import RunStore

QUICK = {"environments": 3, "questions_per_task": 1, "shortlist": 20}
DEFAULT_MODEL = "local:qwen2.5-coder-0.5b"
DEFAULT_JUDGE = "local:qwen2.5-coder-1.5b"
PROMPTS = ("persona", "select_environments", "generate_questions", "exemplars", "judge")


class RunConfig(BaseModel):
    """Everything that defines an evaluation run (recorded in the run directory, without secrets)."""

    personas: list[Persona]
    benchmark: dict[str, dict[str, list[str]]] | None = None  # persona description → task → questions
    models: list[str] = Field(default_factory=lambda: [DEFAULT_MODEL])
    judges: list[str] = Field(default_factory=lambda: [DEFAULT_JUDGE])
    generator: str | None = None  # env_selector, question_gen and exemplar_gen; default: first judge
    environments: int = Field(5, ge=1, le=50)
    shortlist: int = Field(0, ge=0, le=1000)  # selector sees the N environments nearest the persona; 0: all
    questions_per_task: int = Field(2, ge=1, le=50)
    concurrency: int = Field(8, ge=1, le=1024)
    seed: int = 0
    allow_self_judging: bool = False
    persona_temperature: float = Field(0.7, ge=0, le=2)
    max_answer_tokens: int = Field(256, ge=16, le=8192)

    @field_validator("models", "judges")
    @classmethod
    def _non_empty(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError("at least one is needed")
        return list(dict.fromkeys(value))

    def fingerprint(self) -> str:
        """Identifies the work (not the concurrency): a checkpoint thread per persona and config."""
        data = self.model_dump(exclude={"concurrency", "personas", "benchmark"})
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:10]


def check_judges(config: RunConfig, agent_names: list[str]) -> None:
    """Refuses a judge that is also an agent under test, unless self-judging is allowed."""
    if config.allow_self_judging:
        return
    for judge in config.judges:
        if judge in agent_names:
            raise PersonagraphError(
                f"judge {judge} is also the model under test; choose another --judge or pass --allow-self-judging"
            )


def _record_meta(store: RunStore, config: RunConfig) -> None:
    store.set_meta("kind", "eval")
    store.set_meta("config", config.model_dump(mode="json", exclude={"benchmark"}))
    store.set_meta("versions", {"personagraph": __version__})
    store.set_meta("prompts", {name: load_prompt(name).version for name in PROMPTS}
                   | {"pool": data_hash("environments/pool.yaml"), "tasks": data_hash("environments/tasks.yaml")})


async def evaluate(
    config: RunConfig,
    run_dir: str | Path,
    *,
    settings: ModelSettings | None = None,
    agents: list[Agent | str] | None = None,
    on_item: Callable[[str], None] | None = None,
    executor: str = "local",
    ray_address: str | None = None,
) -> dict[str, Any]:
    """Runs (or resumes) an evaluation and returns the summary also written to ``summary.json``.

    Args:
        config: what to evaluate.
        run_dir: the run directory (created if needed; reused to resume).
        settings: endpoint settings shared by the roles (base URL, API key, concurrency).
        agents: agents under test that are not model specs: plug-ins as ``module:attr`` paths (loaded
            here, and by every process that runs units: any executor), or Agent objects (``local``
            only, as objects need not pickle). Every other name in ``config.models`` becomes a
            PersonaAgent over the run store, so its calls are cached.
        on_item: called with a stage name each time an item finishes (progress display).
        executor: ``local`` (this process's event loop) or ``ray`` (persona units as Ray tasks).
        ray_address: the Ray cluster to join (default: a running one, or start one on this machine).
    """
    from personagraph.executors import EvalJob, Plugins, get_executor

    runner = get_executor(executor, address=ray_address)
    settings = settings or ModelSettings()
    settings = settings.model_copy(update={"concurrency": config.concurrency, "seed": config.seed})
    plugins, loaded = Plugins.from_paths(a for a in agents or [] if isinstance(a, str))
    objects = [a for a in agents or [] if not isinstance(a, str)]
    named = {agent.name for agent in [*loaded, *objects]}
    for spec in [*config.models, *config.judges, config.generator or config.judges[0]]:
        if spec not in named:
            parse_spec(spec)
    check_judges(config, [*named, *(m for m in config.models if m not in named)])
    store = RunStore(run_dir, write_behind=True)
    meter = Meter()
    started = time.perf_counter()
    try:
        _record_meta(store, config)
        job = EvalJob(config=config, run_dir=Path(run_dir), settings=settings, agents=objects or None,
                      plugins=plugins, on_item=on_item or (lambda stage: None))
        await runner.run(job, store, meter)
        summary = build_summary(store, config)
        summary.update(
            llm_calls=meter.total_calls,
            cache_hits=meter.total_cache_hits,
            wall_time_s=round(time.perf_counter() - started, 3),
            roles=meter.as_dict(),
            run_dir=str(run_dir),
            executor=runner.name,
        )
        (Path(run_dir) / "summary.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False))
        return summary
    finally:
        store.close()


def build_summary(store: RunStore, config: RunConfig | None = None) -> dict[str, Any]:
    """The scores of a run, computed from its store (optionally restricted to one config's work)."""
    if config is None:
        config = RunConfig.model_validate(store.get_meta("config"))
    persona_ids = {p.id for p in config.personas}
    # Sorted by id, not by finishing time: the bootstrap draws items by position, so the same items must
    # give the same CI whatever order concurrency (or a resumed run) wrote them in.
    answers = [Answer.model_validate(a) for a in store.records("answer")]
    answers = sorted((a for a in answers if a.persona_id in persona_ids and a.model in config.models),
                     key=lambda a: a.id)
    answer_ids = {a.id for a in answers}
    verdicts = [Verdict.model_validate(v) for v in store.records("verdict")]
    verdicts = sorted((v for v in verdicts if v.answer_id in answer_ids and v.judge in config.judges),
                      key=lambda v: v.id)
    selections = [s for s in store.records("selection") if s["persona_id"] in persona_ids]
    summary = summarize_scores(answers, verdicts, config.judges, seed=config.seed)
    summary["personas"] = len(config.personas)
    summary["personas_finished"] = sum(
        1 for r in store.records("persona_done") if r["persona_id"] in persona_ids
    )
    summary["environments_unknown_dropped"] = sum(len(s.get("unknown", [])) for s in selections)
    summary["errors"] = [e for pid in sorted(persona_ids) for e in store.records("error", unit=pid)][:50]
    summary["tokens"] = store.call_stats()
    return summary
