"""Embedded weights are assembled from package parts and verified by sha256 before use."""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

import pytest

from personagraph.errors import PersonagraphError
from personagraph.models import weights
from personagraph.models.spec import LocalModel


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


def test_missing_package_names_the_install_command(fake_packages) -> None:
    model, _ = fake_packages
    missing = LocalModel(model.name, model.description, model.size, model.sha256, ("pg_not_installed_part1",))
    with pytest.raises(PersonagraphError, match=r"pg-not-installed-part1.*personagraph\[local\]"):
        weights.ensure_weights(missing)


def test_a_verified_file_is_not_hashed_again_in_a_new_process(fake_packages, monkeypatch) -> None:
    model, _ = fake_packages
    weights.ensure_weights(model)
    weights._verified.clear()  # as in a new process
    hashed: list[Path] = []
    monkeypatch.setattr(weights, "sha256_file", lambda path: hashed.append(path) or "")
    assert weights.ensure_weights(model) == weights.gguf_path(model)
    assert hashed == []


def test_a_file_changed_after_its_check_is_hashed_and_rebuilt(fake_packages) -> None:
    model, whole = fake_packages
    path = weights.ensure_weights(model)
    before = path.stat().st_mtime_ns
    path.write_bytes(b"X" * len(whole))  # same size, same inode, other bytes
    os.utime(path, ns=(before + 10**9, before + 10**9))  # a later write, even on a coarse clock
    weights._verified.clear()
    assert weights.ensure_weights(model).read_bytes() == whole


def test_a_stamp_that_cannot_be_written_costs_only_the_hash(fake_packages, monkeypatch) -> None:
    model, whole = fake_packages

    def refuse(self: Path, *args: object, **kwargs: object) -> int:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "write_text", refuse)
    assert weights.ensure_weights(model).read_bytes() == whole
    assert not list(weights.cache_dir().glob("*.verified*"))
