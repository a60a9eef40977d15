"""The examples run from the repository root with the deterministic test model."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def examples_env(monkeypatch: pytest.MonkeyPatch) -> str:
    """cwd = repo root (not on sys.path: the plug-in loader must add it), PERSONAGRAPH_EXAMPLE_MODEL=test:…,
    and the examples re-imported so they pick the model up."""
    monkeypatch.setenv("PERSONAGRAPH_EXAMPLE_MODEL", "test:example")
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", str(ROOT))])
    for name in [m for m in sys.modules if m == "examples" or m.startswith("examples.")]:
        monkeypatch.delitem(sys.modules, name)
    return "test:example"
