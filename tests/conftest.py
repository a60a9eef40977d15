"""Shared fixtures: every test runs offline with the deterministic test models unless marked ``embedded``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
# the evidence judge's likelihood features read the deterministic scorer, not the 0.5B (subprocesses too),
# except in tests marked ``embedded``
os.environ.setdefault("PERSONAGRAPH_LIKELIHOOD_MODEL", "test")

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    """A fresh run directory."""
    return tmp_path / "run"


@pytest.fixture(autouse=True)
def _validity_cards(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Validity cards a test saves go to a folder of its own, and no card of the machine's user is read."""
    monkeypatch.setenv("PERSONAGRAPH_CARDS_DIR", str(tmp_path_factory.mktemp("cards")))


@pytest.fixture(autouse=True)
def _likelihood_model(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests of the real embedded models score likelihoods with the packaged 1.5B on its engine."""
    if "embedded" in request.keywords:
        from personagraph.likelihood import MODEL_ENV, PACKAGED_LM

        monkeypatch.setenv(MODEL_ENV, PACKAGED_LM)


def embedded_available() -> bool:
    """Whether llama.cpp's server is built and the embedded model packages are installed."""
    from personagraph.models import LOCAL_MODELS
    from personagraph.models.engine import is_built
    from personagraph.models.weights import is_installed

    return is_built() and all(is_installed(m) for m in LOCAL_MODELS.values())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if embedded_available():
        return
    skip = pytest.mark.skip(reason="embedded models not installed (bash scripts/install.sh)")
    for item in items:
        if "embedded" in item.keywords:
            item.add_marker(skip)
