"""Prompt templates: data files with fixed sections, rendered in a single pass.

A template file (``personagraph/prompts/<name>.yaml``) has ``version``, ``system`` and ``user``. Slots are
written ``{name}``. Rendering substitutes every slot once and never re-reads what it inserted, so model
output placed in a prompt (answers, personas from files) cannot inject further slots or format codes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from personagraph.errors import PersonagraphError
from personagraph.resources import data_hash, read_yaml

_SLOT = re.compile(r"\{([a-z_][a-z0-9_]*)\}")


def render(template: str, values: dict[str, Any]) -> str:
    """Fills ``{slot}``s from ``values`` in one pass; a missing value is a programming error."""

    def fill(match: re.Match[str]) -> str:
        key = match.group(1)
        if key not in values:
            raise KeyError(f"prompt slot {{{key}}} has no value")
        return str(values[key])

    return _SLOT.sub(fill, template)


@dataclass(frozen=True)
class Prompt:
    """A chat prompt template loaded from the package."""

    name: str
    system: str
    user: str
    version: str

    def messages(self, **values: Any) -> list[dict[str, str]]:
        """Renders the template into OpenAI-style chat messages."""
        out = []
        if self.system.strip():
            out.append({"role": "system", "content": render(self.system, values).strip()})
        out.append({"role": "user", "content": render(self.user, values).strip()})
        return out


@lru_cache(maxsize=None)
def load_prompt(name: str) -> Prompt:
    """Loads ``personagraph/prompts/<name>.yaml`` (cached)."""
    path = f"prompts/{name}.yaml"
    data = read_yaml(path)
    if not isinstance(data, dict) or "user" not in data:
        raise PersonagraphError(f"personagraph/{path}: a prompt needs at least a 'user' section")
    version = f"{data.get('version', 1)}-{data_hash(path)}"
    return Prompt(name=name, system=data.get("system", ""), user=data["user"], version=version)
