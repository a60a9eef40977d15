"""Each run kind's CLI command and Python verb take the same options: one flag per config field (named by
``cli._common.flag_for``, which a :class:`ConfigError` also uses to name it), no flag that feeds no field
unless it is listed here with the field it feeds, and the same "where and how to run" options (run
directory, endpoints, executor) in the command and the verb — as inspect_ai's CLI mirrors ``eval()``."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any, get_args

import pytest
import typer
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from personagraph import api
from personagraph.cli import app
from personagraph.cli._common import flag_for
from personagraph.judges.meta_eval import MetaEvalConfig
from personagraph.memory.dialogue_eval import DialogueEvalConfig
from personagraph.metrics.behavior import BehaviorConfig
from personagraph.metrics.longlamp import LongLaMPConfig
from personagraph.metrics.persobench import PersoBenchConfig
from personagraph.runs.eval import EvalConfig
from personagraph.runs.judge_check import JudgeCheckConfig
from personagraph.runs.simulate import SimulateConfig

# run kind: (command path, config, async API verb)
KINDS: dict[str, tuple[tuple[str, ...], type[BaseModel], Any]] = {
    "eval": (("eval",), EvalConfig, api.aevaluate),
    "simulate": (("simulate",), SimulateConfig, api.asimulate),
    "meta-eval": (("meta-eval",), MetaEvalConfig, api.ameta_evaluate),
    "judge-check": (("judge-check",), JudgeCheckConfig, api.ajudge_check),
    "persobench": (("persobench",), PersoBenchConfig, api.apersobench),
    "longlamp": (("longlamp",), LongLaMPConfig, api.alonglamp),
    "behavior": (("behavior-alignment",), BehaviorConfig, api.abehavior_alignment),
    "memory-dialogue": (("memory", "eval-dialogue"), DialogueEvalConfig, api.amemory_dialogue),
}

# where and how a run runs, not what it computes: the verb's keyword arguments beside the config
RUN_OPTIONS = {
    "--run-dir": "run_dir",
    "--base-url": "base_url",
    "--api-key": "api_key",
    "--timeout": "timeout",
    "--endpoint": "endpoints",
    "--executor": "executor",
    "--ray-address": "ray_address",
    "--checkpoint-url": "checkpoint_url",
    "--concurrency": "concurrency",  # persobench, longlamp: requests per endpoint (a settings field)
    "--dialogues": "dialogues",  # memory eval-dialogue: its input files, the verb's positional arguments
    "--memories": "memories",
}

# flags that feed a field in another form, each with why
FEEDERS = {
    ("eval", "--agent"): "models: a plug-in path, the same as --model module:attr",
    ("eval", "--personas"): "personas: read from a file",
    ("simulate", "--no-judge"): "judges: []",
    ("meta-eval", "--self-preference"): "not a field: the self-preference analysis of an eval run",
    ("meta-eval", "--cards"): "not a field: lists the validity cards saved, and runs nothing",
}

CALLBACKS = {"options", "on_progress", "on_event"}


def flags(path: tuple[str, ...]) -> list[list[str]]:
    """The long names of each option of the command at ``path`` (first the primary, then aliases)."""
    return [[o for o in p.opts if o.startswith("--")] for p in options(path)]


def options(path: tuple[str, ...]) -> list[Any]:
    """The click options of the command at ``path``."""
    command = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]  # type: ignore[attr-defined]
    return [p for p in command.params if p.param_type_name == "option"]


def fields(config: type[BaseModel]) -> Iterator[tuple[str, FieldInfo]]:
    """The config's fields, a nested config's (PersoBench's ``score``) flattened into its own."""
    for name, info in config.model_fields.items():
        nested = info.annotation
        if isinstance(nested, type) and issubclass(nested, BaseModel):
            yield from fields(nested)
        else:
            yield name, info


@pytest.mark.parametrize("kind", KINDS)
def test_every_config_field_has_its_flag(kind: str) -> None:
    path, config, _ = KINDS[kind]
    names = {name for option in flags(path) for name in option}
    assert [field for field, _ in fields(config) if flag_for(field) not in names] == []


@pytest.mark.parametrize("kind", KINDS)
def test_every_flag_feeds_a_field_or_says_where_the_run_runs(kind: str) -> None:
    path, config, _ = KINDS[kind]
    known = {flag_for(field) for field, _ in fields(config)} | set(RUN_OPTIONS)
    known |= {flag for (k, flag) in FEEDERS if k == kind}
    assert [option[0] for option in flags(path) if not known & set(option)] == []


@pytest.mark.parametrize("kind", KINDS)
def test_the_verb_takes_the_commands_run_options_and_config_fields_only(kind: str) -> None:
    path, config, verb = KINDS[kind]
    field_flags = {flag_for(field) for field, _ in fields(config)}
    wanted = {RUN_OPTIONS[name] for option in flags(path) for name in option
              if name in RUN_OPTIONS and name not in field_flags}
    parameters = set(inspect.signature(verb).parameters) - CALLBACKS
    assert wanted - parameters == set(), "run options the command has and the verb lacks"
    assert parameters - wanted - set(config.model_fields) == set(), "verb arguments the command lacks"



@pytest.mark.parametrize("kind", KINDS)
def test_a_flag_with_a_default_has_its_fields_default(kind: str) -> None:
    """A flag that states a default states the config's (None leaves the value to the config)."""
    path, config, _ = KINDS[kind]
    defaults = {flag_for(name): info.default for name, info in fields(config)}
    stated = [(p.opts[0], p.default) for p in options(path) if p.opts[0] in defaults]
    stated = [(flag, default) for flag, default in stated if default not in (None, [])]
    wrong = [(flag, default, defaults[flag]) for flag, default in stated if default != defaults[flag]]
    assert wrong == []



def test_judge_session_command_and_verb_take_the_same_options() -> None:
    """judge-session has no config of its own (it judges a transcript with simulate's judging): its flags
    and the verb's keywords are the same list."""
    aliases = {"--judge": "judges", "--endpoint": "endpoints"}
    from_flags = {aliases.get(option[0], option[0][2:].replace("-", "_")) for option in flags(("judge-session",))}
    parameters = set(inspect.signature(api.ajudge_session).parameters) - CALLBACKS - {"transcript"}
    assert from_flags == parameters


def commands(command: Any = None, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every command of the CLI (subcommands of groups included) with its path."""
    command = command or typer.main.get_command(app)
    if hasattr(command, "commands"):
        for name, sub in command.commands.items():
            yield from commands(sub, (*path, name))
    else:
        yield path, command


def _bounded_fields(config: type[BaseModel]) -> set[str]:
    """The flags of ``config``'s fields whose value has a lower and an upper bound (``ge``/``gt``, ``le``/``lt``)."""
    def bounds(info: FieldInfo) -> set[str]:
        return {kind for item in info.metadata for kind in ("ge", "gt", "le", "lt") if getattr(item, kind, None)
                is not None} | {kind for arg in get_args(info.annotation) for item in getattr(arg, "__metadata__", ())
                                for kind in ("ge", "gt", "le", "lt") if getattr(item, kind, None) is not None}
    return {flag_for(name) for name, info in fields(config)
            if bounds(info) & {"ge", "gt"} and bounds(info) & {"le", "lt"}}


def test_every_numeric_flag_of_every_command_has_both_bounds() -> None:
    """A number a flag takes is refused in one line before any work when it is out of range, at both ends — by
    the flag, or by the config field it feeds: an unbounded one (--max-tokens 99999999999, --seed -1) was sent
    on or crashed deep inside."""
    by_config = {path: _bounded_fields(config) for path, config, _ in KINDS.values()}
    unbounded = [
        (" ".join(path), option.opts[0])
        for path, command in commands()
        for option in command.params
        if option.param_type_name == "option"
        and {int, float} & {option.type_descriptor.annotation, *get_args(option.type_descriptor.annotation)}
        and (option.min is None or option.max is None)
        and option.opts[0] not in by_config.get(path, set())
    ]
    assert unbounded == []
