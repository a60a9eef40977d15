"""Make the repository root importable so tests can ``import bench.fake_openai``; ``complete_once`` asks a
real embedded engine one short question."""

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from personagraph.models.engine import Engine
from personagraph.models.openai_http import close_sessions, post_json

_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)


@pytest.fixture
def complete_once() -> Callable[[Engine], dict[str, Any]]:
    """Sends one short greedy ``/completion`` to an embedded engine's server (started if needed) and
    returns the server's reply."""

    def complete(engine: Engine) -> dict[str, Any]:
        async def ask() -> dict[str, Any]:
            try:
                root = (await engine.base_url()).removesuffix("/v1")
                body = {"prompt": "The capital of France is", "n_predict": 4, "temperature": 0.0}
                return await post_json(root + "/completion", body, timeout_s=300)
            finally:
                await close_sessions()

        return asyncio.run(ask())

    return complete
