"""The documentation site builds with ``mkdocs build --strict`` (no broken link, anchor or reference), and
its CLI reference names every command and flag of the typer app."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer

import personagraph
from personagraph.cli import app

ROOT = Path(__file__).resolve().parents[2]


def commands(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every command and group of the click tree typer builds, with its path (the root is ``()``)."""
    yield path, command
    for name, sub in getattr(command, "commands", {}).items():
        yield from commands(sub, (*path, name))


def anchor(path: tuple[str, ...]) -> str:
    return "-".join(["personagraph", *path])


def missing_flags(page: str, root: Any) -> list[str]:
    """``command: flag`` for every flag of ``root``'s commands not in that command's section of the built
    CLI reference ``page`` (HTML), and ``command`` for a command without a section."""
    starts = {m.group(1): m.start() for m in re.finditer(r'<h[2-4] id="(personagraph[a-z0-9-]*)"', page)}
    bounds = sorted(starts.values()) + [len(page)]
    missing = []
    for path, command in commands(root):
        name = " ".join(["personagraph", *path])
        start = starts.get(anchor(path))
        if start is None:
            missing.append(name)
            continue
        section = html.unescape(page[start : bounds[bounds.index(start) + 1]])
        for param in command.params:
            if param.param_type_name != "option" or param.hidden:
                continue
            missing += [f"{name}: {flag}" for flag in [*param.opts, *param.secondary_opts]
                        if f"<code>{flag}</code>" not in section]
    return missing


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built once for this module: ``mkdocs build --strict``, as ``.ci/run`` runs it."""
    out = tmp_path_factory.mktemp("site")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return out


def test_the_site_builds_strict(site: Path) -> None:
    pages = {p.relative_to(site).as_posix() for p in site.rglob("index.html")}
    assert {"index.html", "getting-started/index.html", "reference/cli/index.html",
            "reference/api/index.html", "benchmarks/index.html", "architecture/index.html"} <= pages


def test_every_command_and_flag_is_on_the_cli_reference(site: Path) -> None:
    page = (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    assert missing_flags(page, typer.main.get_command(app)) == []


def test_a_missing_flag_is_caught() -> None:
    """The check above is not vacuous: a page without one flag, or without a command, fails it."""
    root = typer.main.get_command(app)
    page = (
        '<h2 id="personagraph-eval">personagraph eval</h2><code>--persona</code>'
        '<h2 id="personagraph-view">personagraph view</h2>'
    )
    missing = missing_flags(page, root)
    assert "personagraph eval: --run-dir" in missing and "personagraph eval: --persona" not in missing
    assert "personagraph simulate" in missing


def test_the_api_reference_covers_the_public_api(site: Path) -> None:
    text = "".join(
        html.unescape((site / "reference" / page / "index.html").read_text(encoding="utf-8"))
        for page in ("api", "types")
    )
    absent = [name for name in personagraph.__all__ if name != "__version__" and f">{name}<" not in text]
    assert absent == []
    for verb in ("aevaluate", "asimulate", "ajudge_check", "ameta_evaluate"):  # rendered from docstrings
        assert f'id="personagraph.api.{verb}"' in text


def test_the_cli_reference_keeps_each_flag_whole_and_fills_the_defaults(site: Path) -> None:
    """A flag is never broken (each name its own code span in a first column the site's CSS keeps on one
    line), and an option whose help states its default in its first sentence shows it as its default."""
    page = (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    css = (site / "stylesheets" / "extra.css").read_text(encoding="utf-8")
    assert "stylesheets/extra.css" in page and "td:first-child code" in css and "white-space: nowrap" in css
    cells = [re.findall(r"<td>(.*?)</td>", row, re.DOTALL) for row in page.split("<tr>")[1:]]
    rows = [row for row in cells if len(row) == 4]  # the options tables' rows
    assert len(rows) > 100
    for names, _, description, default in rows:
        assert re.fullmatch(r"<code>-[^<\s]+</code>(<br\s*/?><code>-[^<\s]+</code>)*", names.strip()), names
        first = re.sub(r"<[^>]+>", "", html.unescape(description)).split(". ", 1)[0]
        if "(default " in first or "(repeatable; default " in first:
            assert default.strip(), (names, description)
    eval_section = page.split('id="personagraph-eval"', 1)[1].split("<h2", 1)[0]
    assert re.search(r"<code>--environments</code></td>\s*<td>INTEGER</td>\s*<td>[^<]*</td>\s*<td>5</td>",
                     eval_section)
