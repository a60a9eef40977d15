"""Embedded weights are assembled from package parts and verified by sha256 before use."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytest

from personagraph.errors import PersonagraphError
from personagraph.models.spec import LocalModel
from personagraph.models import weights


@pytest.fixture
def fake_packages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[LocalModel, bytes]:
    """Two importable packages carrying data/part*.bin, like the real weight packages."""
    site = tmp_path / "site"
    chunks = [b"GGUF" + bytes(range(256)) * 40, b"tail" * 999]
    for i, chunk in enumerate(chunks, 1):
        pkg = site / f"pg_fake_part{i}"
        (pkg / "data").mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        (pkg / "data" / f"part{i:02d}.bin").write_bytes(chunk)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("PERSONAGRAPH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(weights, "_verified", set())
    whole = b"".join(chunks)
    model = LocalModel("fake", "fake", len(whole), hashlib.sha256(whole).hexdigest(),
                       ("pg_fake_part1", "pg_fake_part2"))
    yield model, whole
    for name in ("pg_fake_part1", "pg_fake_part2"):
        sys.modules.pop(name, None)


def test_assembles_parts_in_order_and_verifies(fake_packages) -> None:
    model, whole = fake_packages
    path = weights.ensure_weights(model)
    assert path.read_bytes() == whole
    assert path.parent == weights.cache_dir()
    assert not list(path.parent.glob("*.tmp*"))


def test_wrong_sha256_is_refused_and_leaves_nothing(fake_packages) -> None:
    model, _ = fake_packages
    bad = LocalModel(model.name, model.description, model.size, "0" * 64, model.packages)
    with pytest.raises(PersonagraphError, match="do not match sha256"):
        weights.ensure_weights(bad)
    assert not weights.gguf_path(bad).exists()


def test_corrupted_cached_file_is_rebuilt(fake_packages) -> None:
    model, whole = fake_packages
    path = weights.ensure_weights(model)
    path.write_bytes(b"X" * len(whole))  # same size, wrong bytes
    weights._verified.clear()
    assert weights.ensure_weights(model).read_bytes() == whole


def test_missing_package_names_the_install_command(fake_packages) -> None:
    model, _ = fake_packages
    missing = LocalModel(model.name, model.description, model.size, model.sha256, ("pg_not_installed_part1",))
    with pytest.raises(PersonagraphError, match=r"pg-not-installed-part1.*personagraph\[local\]"):
        weights.ensure_weights(missing)
