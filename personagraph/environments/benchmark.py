"""Static benchmark mode: one JSON file per persona, mapping task name → questions."""

from __future__ import annotations

from pathlib import Path

from personagraph.environments.pool import task_by_name
from personagraph.errors import PersonagraphError
from personagraph.files import read_json
from personagraph.schemas import MAX_PERSONA_CHARS, MAX_QUESTION_CHARS, Persona


def load_benchmark(directory: str | Path) -> list[tuple[Persona, dict[str, list[str]]]]:
    """Reads ``DIR/<persona description>.json`` files: ``{task name: [question, ...]}``.

    Task names match case-insensitively, "Toxicity" standing for "Toxicity Control".

    Raises:
        PersonagraphError: naming the file and what is wrong with it.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise PersonagraphError(f"--benchmark {directory}: not a directory")
    files = sorted(directory.glob("*.json"))
    if not files:
        raise PersonagraphError(f"--benchmark {directory}: no .json files")
    out = []
    seen: dict[str, Path] = {}
    for path in files:
        description = path.name[: -len(".json")]
        if not description.strip() or len(description) > MAX_PERSONA_CHARS:
            raise PersonagraphError(f"{path}: the file name must be the persona description")
        data = read_json(path)
        if not isinstance(data, dict) or not data:
            raise PersonagraphError(f"{path}: expected an object mapping task names to lists of questions")
        questions: dict[str, list[str]] = {}
        for name, items in data.items():
            task = task_by_name(str(name))
            if task is None:
                raise PersonagraphError(f"{path}: unknown task {name!r}")
            if not isinstance(items, list) or not items or not all(isinstance(q, str) and q.strip() for q in items):
                raise PersonagraphError(f"{path}: task {name!r} must map to a non-empty list of non-empty strings")
            if too_long := next((q for q in items if len(q) > MAX_QUESTION_CHARS), None):
                raise PersonagraphError(f"{path}: task {name!r}: a question of {len(too_long)} characters; "
                                        f"the limit is {MAX_QUESTION_CHARS}")
            questions.setdefault(task.name, []).extend(" ".join(q.split()) for q in items)
        persona = Persona(description=description)
        if persona.id in seen:
            raise PersonagraphError(
                f"{path}: the same persona as {seen[persona.id].name} (names equal once spaces are normalised)"
            )
        seen[persona.id] = path
        out.append((persona, questions))
    return out
