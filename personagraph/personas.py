"""Loading personas from the command line or from files (.txt, .jsonl, .yaml)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from personagraph.errors import PersonagraphError
from personagraph.files import parse_yaml, read_jsonl, read_text
from personagraph.schemas import MAX_PERSONA_CHARS, Persona, persona_description


def parse_persona(value: Any, where: str) -> Persona:
    """One persona (a text, or an object with ``persona``) read at ``where`` (a flag, a file and line):
    a PersonagraphError naming ``where`` when it is no text, too long, or has nothing visible in it."""
    if isinstance(value, dict):
        value = value.get("persona", value.get("description"))
    if not isinstance(value, str):
        raise PersonagraphError(f"{where}: expected a persona text (or an object with 'persona'), got {type(value).__name__}")
    if len(value) > MAX_PERSONA_CHARS:
        raise PersonagraphError(f"{where}: persona is {len(value)} characters; the limit is {MAX_PERSONA_CHARS}")
    try:
        return Persona(description=persona_description(value))
    except ValueError as exc:
        raise PersonagraphError(f"{where}: {exc}") from None


def load_personas(path: str | Path) -> list[Persona]:
    """Reads personas: .txt (one a line, blank lines and #comments skipped), .jsonl (a string or an
    object with ``persona`` per line) or .yaml (a list, or ``{personas: [...]}``). Duplicates are dropped.

    Raises:
        PersonagraphError: naming the file (and line) of the first problem.
    """
    path = Path(path)
    text = read_text(path)
    if "\x00" in text:
        raise PersonagraphError(f"{path}: binary file, expected UTF-8 text")
    suffix = path.suffix.lower()
    personas: list[Persona] = []
    if suffix == ".txt":
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip() and not line.lstrip().startswith("#"):
                personas.append(parse_persona(line, f"{path}:{number}"))
    elif suffix == ".jsonl":
        for number, value in read_jsonl(path, text=text):
            personas.append(parse_persona(value, f"{path}:{number}"))
    elif suffix in (".yaml", ".yml"):
        data = parse_yaml(text, path)
        if isinstance(data, dict):
            data = data.get("personas")
        if not isinstance(data, list):
            raise PersonagraphError(f"{path}: expected a list of personas (or a 'personas' list)")
        personas = [parse_persona(item, f"{path}: item {i + 1}") for i, item in enumerate(data)]
    else:
        raise PersonagraphError(f"{path}: unsupported persona file type {suffix!r}; use .txt, .jsonl or .yaml")
    unique = list({p.description: p for p in personas}.values())
    if not unique:
        raise PersonagraphError(f"{path}: no personas found")
    return unique
