"""Where a benchmark's files come from: a pinned upstream file, downloaded once into the user's cache and
checked by sha256, or a local copy from ``--benchmark-dir``.

Nothing is downloaded unless a benchmark is asked for. A download goes to a temporary file beside its
place in the cache and is moved there only once its size and sha256 match the pin, so the cache never
holds a partial or altered file. A local copy (``<benchmark-dir>/<source>/<upstream file name>``) may be a
subset of the upstream file: its sha256 is recorded, not required.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import sys
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from personagraph.errors import PersonagraphError
from personagraph.models.weights import cache_root

MIRROR_ENV = "PERSONAGRAPH_BENCHMARK_MIRROR"
"""A base URL that replaces ``https://raw.githubusercontent.com`` (a mirror with the same layout:
``<base>/<owner>/<repository>/<commit>/<path>``)."""
UPSTREAM = "https://raw.githubusercontent.com"
TIMEOUT_S = 60.0
CHUNK = 1 << 16


@dataclass(frozen=True)
class SourceFile:
    """One upstream file, pinned: repository at a commit, its path there, its sha256 and size."""

    source: str  # the folder under --benchmark-dir and the cache: characterbench, usr, persobench
    repository: str  # owner/name
    commit: str
    path: str  # in the repository
    sha256: str
    size: int

    @property
    def name(self) -> str:
        """The upstream file name: what a local copy is called in ``<benchmark-dir>/<source>/``."""
        return self.path.rsplit("/", 1)[-1]

    @property
    def url(self) -> str:
        base = (os.environ.get(MIRROR_ENV) or UPSTREAM).rstrip("/")
        return f"{base}/{self.repository}/{self.commit}/{self.path}"


@dataclass(frozen=True)
class Located:
    """A file ready to read, and what the result records about it."""

    file: SourceFile
    path: Path
    sha256: str
    origin: str  # "download" (verified against the pin) or "local copy"

    @property
    def pinned(self) -> bool:
        return self.sha256 == self.file.sha256


def benchmarks_cache() -> Path:
    """``<cache>/benchmarks``: verified downloads, one folder per source."""
    return cache_root() / "benchmarks"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def locate(file: SourceFile, benchmark_dir: Path | None, *, progress: IO[str] | None = None) -> Located:
    """The file from ``benchmark_dir`` when one is given, else from the cache, downloading it first.

    Raises:
        PersonagraphError: a local copy that is missing; a download that fails, is cut short or does not
            match its pin (naming the URL and the ``--benchmark-dir`` way around it).
    """
    if benchmark_dir is not None:
        path = benchmark_dir / file.source / file.name
        if not path.is_file():
            raise PersonagraphError(
                f"--benchmark-dir {benchmark_dir}: no {file.source}/{file.name} (a local copy of "
                f"{file.repository}/{file.path} is read from there)"
            )
        return Located(file, path, sha256_of(path), "local copy")
    path = benchmarks_cache() / file.source / file.name
    if path.is_file() and path.stat().st_size == file.size and sha256_of(path) == file.sha256:
        return Located(file, path, file.sha256, "download")
    download(file, path, progress=progress if progress is not None else sys.stderr)
    return Located(file, path, file.sha256, "download")


def download(file: SourceFile, target: Path, *, progress: IO[str]) -> None:
    """Downloads ``file`` to ``target`` through a temporary file, verified before it takes the name."""
    way_around = (
        f"or download it yourself and pass --benchmark-dir DIR with it at DIR/{file.source}/{file.name}"
    )
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{file.name}.", suffix=".part")
    try:
        digest = hashlib.sha256()
        received = 0
        with os.fdopen(handle, "wb") as out:
            try:
                with urllib.request.urlopen(file.url, timeout=TIMEOUT_S) as response:  # noqa: S310 (pinned URL)
                    while chunk := response.read(CHUNK):
                        out.write(chunk)
                        digest.update(chunk)
                        received += len(chunk)
                        progress.write(
                            f"\rdownloading {file.url}: {received / 1e6:.1f} / {file.size / 1e6:.1f} MB"
                        )
                        progress.flush()
            except (urllib.error.URLError, http.client.HTTPException, OSError, TimeoutError) as exc:
                reason = getattr(exc, "reason", None) or exc
                raise PersonagraphError(f"cannot download {file.url} ({reason}); {way_around}") from None
            finally:
                if received:
                    progress.write("\n")
        if received != file.size:
            raise PersonagraphError(
                f"download of {file.url} cut short or padded: {received} bytes, expected {file.size}; "
                f"nothing was cached (run again, {way_around})"
            )
        if digest.hexdigest() != file.sha256:
            raise PersonagraphError(
                f"{file.url}: sha256 {digest.hexdigest()[:16]}… does not match the pinned "
                f"{file.sha256[:16]}…; nothing was cached"
            )
        os.replace(temporary, target)
    finally:
        Path(temporary).unlink(missing_ok=True)
