"""What the red-team tests share: the CLI run in this process, the one-line-error check, a folder's bytes."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from personagraph.cli import app


def cli(*args: str, input: str | bytes | None = None) -> tuple[int, str]:
    """Runs the CLI in this process: (exit code, stdout + stderr)."""
    result = CliRunner().invoke(app, ["-q", *args], catch_exceptions=False, input=input)
    return result.exit_code, result.output


def one_line_error(output: str) -> str:
    """The one ``error: …`` line ``output`` must be (never a traceback or an internal error)."""
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), output
    assert "internal error" not in output and "Traceback" not in output
    return lines[0]


def tree(path: Path) -> dict[str, bytes]:
    """Every file under ``path`` (or ``path`` itself) with its bytes: what must stay unchanged."""
    if path.is_file():
        return {path.name: path.read_bytes()}
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def small_bank(folder: Path, users: tuple[str, ...] = ("bob", "alice"), n: int = 30) -> Path:
    """A local memory bank of ``n`` memories per user at ``folder`` (random embeddings: no model needed)."""
    import numpy as np

    from personagraph.memory.bank import Memory, MemoryBank

    bank = MemoryBank(folder)
    for user in users:
        memories = [Memory(id=str(i), user_id=user, event=f"{user} went on a beach trip {i}") for i in range(n)]
        bank.add(memories, np.random.default_rng(1).random((n, 384), dtype=np.float32))
    return folder
