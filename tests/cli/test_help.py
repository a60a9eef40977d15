"""``--help`` reads like a person wrote it, and tables never cut the cells people copy."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import typer
from rich.console import Console
from rich.table import Table
from typer.testing import CliRunner

from personagraph.cli import app
from personagraph.models import LOCAL_MODELS
from personagraph.terminal import key_column


def _commands(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every leaf command with its path (typer builds click-like objects; groups have ``commands``)."""
    if hasattr(command, "commands"):
        for name, sub in command.commands.items():
            yield from _commands(sub, (*path, name))
    else:
        yield path, command


COMMANDS = list(_commands(typer.main.get_command(app)))
TYPE_NAME = re.compile(r"<(bool|str|int|float|path|Path|list\[[^\]]*\]|int range|float range)>")  # typer's raw types


def test_every_command_is_found():
    names = {" ".join(path) for path, _ in COMMANDS}
    assert {"eval", "simulate", "models", "memory eval-retrieval", "compare"} <= names


@pytest.mark.parametrize("path", [p for p, _ in COMMANDS], ids=[" ".join(p) for p, _ in COMMANDS])
def test_help_has_no_type_names_and_a_line_for_every_option(path):
    result = CliRunner().invoke(app, [*path, "--help"])
    assert result.exit_code == 0, result.output
    option_lines = [line for line in result.output.splitlines() if re.match(r"\s+(-\w, )?--[\w-]+", line)]
    assert option_lines
    for line in option_lines:
        assert not TYPE_NAME.search(line), line
    command = dict(COMMANDS)[path]
    missing = [p.name for p in command.params if p.param_type_name == "option" and not (p.help or "").strip()]
    assert not missing


@pytest.mark.parametrize("path", [p for p, _ in COMMANDS], ids=[" ".join(p) for p, _ in COMMANDS])
def test_arguments_are_named_in_capitals_without_type_names(path):
    output = CliRunner().invoke(app, [*path, "--help"]).output
    arguments = [p.metavar for p in dict(COMMANDS)[path].params if p.param_type_name == "argument"]
    assert all(name and name.isupper() for name in arguments), arguments
    listed = output.split("Arguments:", 1)[1].split("Options:", 1)[0] if arguments else ""
    assert not TYPE_NAME.search(listed), listed  # "QUESTION", not "question <str>"


def test_switches_show_no_value_and_values_a_readable_one():
    output = CliRunner().invoke(app, ["eval", "--help"]).output
    assert re.search(r"^\s+--quick\s{2,}Small run", output, re.M)  # a switch: nothing between flag and help
    assert re.search(r"^\s+--persona TEXT\s", output, re.M)
    assert re.search(r"^\s+--environments INTEGER\s", output, re.M)
    assert re.search(r"^\s+--run-dir PATH\s", output, re.M)


def test_square_brackets_in_help_survive():
    output = CliRunner().invoke(app, ["eval", "--help"]).output
    assert "personagraph[ray]" in " ".join(output.split())


def test_models_piped_into_a_narrow_pipe_prints_every_spec_whole():
    env = {**os.environ, "COLUMNS": "60"}
    result = subprocess.run([sys.executable, "-m", "personagraph.cli", "models"], capture_output=True,
                            text=True, env=env, timeout=120, check=True)
    for name in LOCAL_MODELS:
        assert f"local:{name}" in result.stdout, result.stdout
    assert "…" not in result.stdout


def test_a_key_column_stays_whole_while_the_others_wrap():
    table = Table()
    specs = ["openai:meta-llama/Llama-3.1-8B-Instruct", "local:qwen2.5-coder-1.5b"]
    key_column(table, "spec", specs)
    table.add_column("about", overflow="fold")
    for spec in specs:
        table.add_row(spec, "a long description of the model that has to wrap somewhere " * 2)
    out = io.StringIO()
    Console(file=out, width=50).print(table)
    for spec in specs:
        assert spec in out.getvalue()
