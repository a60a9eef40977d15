"""No import cycles among personagraph's modules (imports under ``if TYPE_CHECKING:`` do not run and are
left out; imports inside functions count: hiding an import in a function does not remove a cycle), and the
floors of docs/architecture.md hold: ``lint-imports`` checks the layers contract of pyproject.toml's
``[tool.importlinter]``, so a lower floor importing a higher one fails here."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "personagraph"
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")  # import-linter, in the dev extra


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_only(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imported(tree: ast.AST, name: str, is_package: bool, modules: set[str]) -> set[str]:
    """The personagraph modules a module imports (``from pkg import sub`` names the submodule)."""
    found: set[str] = set()
    stack = list(ast.iter_child_nodes(tree))
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _type_checking_only(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if is_package else name.split(".")[:-1]
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
        stack.extend(ast.iter_child_nodes(node))
    return {m for m in found if m in modules}


def import_graph() -> dict[str, set[str]]:
    files = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    modules = set(files)
    return {
        name: imported(ast.parse(path.read_text(encoding="utf-8")), name, path.name == "__init__.py", modules)
        - {name}
        for name, path in files.items()
    }


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` (a list of modules, the first repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_checker_finds_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_the_graph_sees_the_package() -> None:
    graph = import_graph()
    assert "personagraph.runs.base" in graph["personagraph.runs.eval"]
    assert "personagraph.runs.eval" in graph["personagraph.api"]


def test_no_import_cycles() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " → ".join(cycle or [])


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` on the ``personagraph`` package under ``root``, with ``root``'s pyproject.toml."""
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo", str(root / "pyproject.toml")],
        cwd=root, env=dict(os.environ, PYTHONPATH=str(root)), capture_output=True, text=True, timeout=300,
    )


def test_the_floors_are_kept() -> None:
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 1 kept, 0 broken." in result.stdout


UPWARD = [  # (module, planted import, the floor it is on, the higher floor it reaches)
    ("models/spec.py", "import personagraph.judges.scoring", "models", "judges"),
    ("errors.py", "from personagraph import cli", "errors", "cli"),
    ("graphs/session.py", "from personagraph.runs import eval", "graphs", "runs"),
]


@pytest.mark.parametrize(("module", "planted", "lower", "higher"), UPWARD, ids=[m for m, *_ in UPWARD])
def test_a_lower_floor_importing_a_higher_one_fails(
    tmp_path: Path, module: str, planted: str, lower: str, higher: str
) -> None:
    """The contract is not vacuous: a copy of the package with one upward import planted breaks it (the
    graphs → runs case shows that the named exceptions let nothing else through)."""
    shutil.copytree(PACKAGE, tmp_path / "personagraph",
                    ignore=lambda folder, names: [n for n in names if n == "__pycache__" or (
                        not n.endswith(".py") and not (Path(folder) / n).is_dir())])
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / "personagraph" / module
    target.write_text(target.read_text(encoding="utf-8") + f"\n{planted}  # planted\n", encoding="utf-8")
    result = lint_imports(tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    message = f"personagraph.{lower} is not allowed to import personagraph.{higher}"
    assert message in " ".join(result.stdout.split())
