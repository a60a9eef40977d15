"""Every code block the docs mark as runnable runs, offline, with test models.

Markers (an HTML comment on the line before a fenced block; the site does not show them):

- ``<!-- runnable -->`` before a ```` ```python ```` block: executed (the page's Python blocks share one
  namespace, in page order); before a ```` ```bash ```` block: each ``personagraph …`` command in it is run
  and must exit 0, after its ``export NAME=value …`` lines set the environment (other commands are not
  allowed in a runnable block).
- ``<!-- file: PATH -->`` before any block: its text is written to ``PATH`` first (data a later block reads).

A page's blocks run in order in one fresh directory, as a reader following the page would. Every model
spec resolves to a ``test:`` model of the same name (``openai:gpt-4o`` → ``test:gpt-4o``; the defaults,
``local:…``, too), so the blocks show the real specs and still run offline in seconds.
"""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from personagraph.cli import app
from personagraph.models import ModelClient, parse_spec

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "docs").rglob("*.md")) + [ROOT / "README.md"]
BLOCK = re.compile(
    r"^<!-- (runnable|file: (?P<path>[^>]+?)) -->[ \t]*\n```(?P<lang>[\w-]*)[^\n]*\n(?P<code>.*?)^```[ \t]*$",
    re.MULTILINE | re.DOTALL,
)
MARKER = re.compile(r"^<!-- (runnable|file: [^>]+) -->", re.MULTILINE)


def blocks(page: Path) -> list[tuple[str, str, str]]:
    """(kind, lang or path, code) of every marked block of ``page``, in page order."""
    text = page.read_text(encoding="utf-8")
    found = [
        ("file", m.group("path").strip(), m.group("code"))
        if m.group("path")
        else ("run", m.group("lang"), m.group("code"))
        for m in BLOCK.finditer(text)
    ]
    assert len(found) == len(MARKER.findall(text)), f"{page}: a marker is not followed by a fenced block"
    return found


RUNNABLE = [p for p in PAGES if any(kind == "run" for kind, _, _ in blocks(p))]


def shell_commands(code: str) -> list[list[str]]:
    """The commands of a bash block: continuation lines joined, comments and blank lines dropped."""
    joined = re.sub(r"\\\n", " ", code)
    return [words for line in joined.splitlines() if (words := shlex.split(line, comments=True))]


class Shown(ModelClient):
    """A test model client that keeps the name of the spec it stands for (verdicts, summaries)."""

    shown: str

    @property
    def name(self) -> str:
        return self.shown


@pytest.fixture
def offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh working directory where every model is a test model and nothing leaves the machine."""
    create = ModelClient.create.__func__  # type: ignore[attr-defined]

    def as_test_model(cls: type[ModelClient], spec: str, role: str, **kwargs: object) -> ModelClient:
        parsed = parse_spec(spec) if isinstance(spec, str) else spec
        if parsed.provider == "test":
            return create(cls, parsed, role, **kwargs)
        client = create(cls, f"test:{parsed.name}", role, **kwargs)
        client.__class__, client.shown = Shown, str(parsed)  # named in the run as the docs name it
        return client

    monkeypatch.setattr(ModelClient, "create", classmethod(as_test_model))
    monkeypatch.setenv("PERSONAGRAPH_EXAMPLE_MODEL", "test:example")  # examples/ build their own chat model
    for name in ("PERSONAGRAPH_MEMORY_DIR", "LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2", "LANGSMITH_API_KEY",
                 "OPENAI_BASE_URL", "OPENAI_API_KEY"):  # nothing may reach a real endpoint
        monkeypatch.delenv(name, raising=False)
    monkeypatch.syspath_prepend(str(ROOT))  # --agent examples.…: the repository's examples/
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_docs_have_runnable_blocks() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in RUNNABLE}
    assert {"docs/getting-started.md", "docs/guides/evaluate.md", "docs/guides/sessions.md"} <= names


@pytest.mark.parametrize("page", RUNNABLE, ids=[p.relative_to(ROOT).as_posix() for p in RUNNABLE])
def test_runnable_blocks_run(page: Path, offline: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    namespace: dict[str, object] = {"__name__": "__main__"}
    for number, (kind, what, code) in enumerate(blocks(page), 1):
        where = f"{page.relative_to(ROOT)} block {number}"
        if kind == "file":
            target = offline / what
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(code, encoding="utf-8")
        elif what == "python":
            exec(compile(code, where, "exec"), namespace)  # noqa: S102 - the docs' own examples
        elif what in ("bash", "sh", "console"):
            for words in shell_commands(code):
                if words[0] == "export":
                    for assignment in words[1:]:
                        monkeypatch.setenv(*assignment.split("=", 1))
                    continue
                assert words[0] == "personagraph", f"{where}: only personagraph commands run here: {words}"
                result = CliRunner().invoke(app, words[1:])
                assert result.exit_code == 0, (
                    f"{where}: {shlex.join(words)} exited {result.exit_code}\n{result.output}"
                    + (f"\n{result.exception!r}" if result.exception else "")
                )
        else:
            pytest.fail(f"{where}: a runnable block must be python or bash, not {what!r}")
    sys.stdout.flush()


NOT_RUN_HERE = {
    ("docs/guides/evaluate.md", "personagraph ask"): "the page's overview; its runnable blocks run eval",
    ("docs/guides/evaluate.md", "personagraph eval"): "the page's overview, with a personas.txt of one's own",
    ("docs/guides/judge-validity.md", "personagraph meta-eval"): "downloads the benchmarks' files; an API judge",
    ("docs/guides/memory.md", "personagraph memory eval-retrieval"): "needs the MADial-Bench data files",
    ("docs/guides/memory.md", "personagraph memory eval-dialogue"): "needs the MADial-Bench data files",
    ("docs/guides/metrics.md", "personagraph behavior-alignment"): "needs the INSPIRED dialogues",
    ("docs/guides/metrics.md", "personagraph longlamp"): "needs LongLaMP records",
    ("docs/guides/models.md", "personagraph eval"): "needs a running OpenAI-compatible server",
    ("docs/guides/sessions.md", "personagraph chat"): "interactive: a person types the user's turns",
    ("docs/guides/testing.md", ".venv/bin/python -m"): "runs pytest on the embedded models",
}
"""The guides' commands that the runnable blocks do not run, each with why it cannot run here."""


def test_every_guide_command_runs_or_says_why_not() -> None:
    """A guide's command is run as written (a runnable block) or listed in :data:`NOT_RUN_HERE` with its
    reason: a command that needs setting up which its page never mentions cannot hide in a plain block."""
    unrun = set()
    for page in sorted((ROOT / "docs" / "guides").glob("*.md")):
        text = page.read_text(encoding="utf-8")
        for match in re.finditer(r"^(<!-- [^\n]*-->[ \t]*\n)?```(?:bash|sh|console)[^\n]*\n(.*?)^```", text,
                                 re.MULTILINE | re.DOTALL):
            if match.group(1):
                continue
            for words in shell_commands(match.group(2)):
                command = words[:3] if words[1:2] == ["memory"] else words[:2]  # the command and subcommand
                unrun.add((page.relative_to(ROOT).as_posix(), " ".join(command)))
    assert unrun == set(NOT_RUN_HERE), "run these in a runnable block, or list them with why they cannot run"
