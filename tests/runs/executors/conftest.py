"""One small local Ray instance for every Ray test in this directory (started once: it costs seconds)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="package")
def ray_cluster() -> Iterator[Any]:
    """Ray on this machine: 2 CPUs, a small object store, no dashboard."""
    ray = pytest.importorskip("ray")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(num_cpus=2, object_store_memory=80 * 1024**2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()
