"""Loading the environment pool and the five task specs (package data files)."""

from __future__ import annotations

from functools import lru_cache

from pydantic import ValidationError

from personagraph.errors import PersonagraphError
from personagraph.resources import read_yaml
from personagraph.schemas import Environment, Task

POOL_FILE = "environments/pool.yaml"
TASKS_FILE = "environments/tasks.yaml"

# Benchmark files and users may spell task names differently; these are accepted too.
TASK_ALIASES = {"toxicity": "Toxicity Control"}


@lru_cache(maxsize=1)
def load_pool() -> tuple[Environment, ...]:
    """The environment pool, in file order."""
    try:
        return tuple(Environment.model_validate(e) for e in read_yaml(POOL_FILE)["environments"])
    except (KeyError, TypeError, ValidationError) as exc:
        raise PersonagraphError(f"personagraph/{POOL_FILE}: malformed ({exc})") from None


@lru_cache(maxsize=1)
def load_tasks() -> tuple[Task, ...]:
    """The five PersonaGym tasks, in canonical order."""
    try:
        return tuple(Task.model_validate(t) for t in read_yaml(TASKS_FILE)["tasks"])
    except (KeyError, TypeError, ValidationError) as exc:
        raise PersonagraphError(f"personagraph/{TASKS_FILE}: malformed ({exc})") from None


def task_by_name(name: str) -> Task | None:
    """Finds a task by name, key or alias, case-insensitively ("toxicity" → Toxicity Control)."""
    wanted = " ".join(name.replace("_", " ").split()).lower()
    wanted = TASK_ALIASES.get(wanted, wanted).lower()
    for task in load_tasks():
        if wanted in (task.name.lower(), task.key.replace("_", " ")):
            return task
    return None
