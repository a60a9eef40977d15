"""The site's build code (mkdocs.yml names this file twice).

1. MkDocs hook: the CLI reference is generated from the typer app at every build, so it cannot drift.
   ``docs/reference/cli.md`` holds the marker ``<!-- cli-reference -->``; :func:`on_page_markdown` replaces it
   with one section per command (help, usage, arguments, options with their defaults), walked from
   ``personagraph.cli.app`` as ``personagraph --help`` sees it (a default only the help text states, as
   ``(default 5)``, fills the default column too). ``tests/docs`` checks every flag is on the built page.
2. Griffe extension :class:`SphinxRoles`: the package's docstrings cross-reference in Sphinx's way
   (``:class:`~personagraph.agents.Agent```); the API reference shows those as code (``Agent``).
"""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Iterator
from typing import Any

MARKER = "<!-- cli-reference -->"
_CODE = re.compile(r"(`[^`]*`)")
_SPECIAL = re.compile(r"([\\*_{}\[\]|])")


def _text(text: str | None) -> str:
    """Help text as one Markdown line: code spans kept, other Markdown characters escaped."""
    parts = _CODE.split(" ".join((text or "").split()))
    return "".join(
        part if part.startswith("`") else _SPECIAL.sub(r"\\\1", part).replace("<", "&lt;") for part in parts
    )


def commands(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every command of the click tree under ``command`` with its path, groups before their commands."""
    yield path, command
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        yield from commands(sub, (*path, name))


def _usage(path: tuple[str, ...], command: Any) -> str:
    pieces = ["personagraph", *path]
    if getattr(command, "commands", None):
        pieces += ["COMMAND", "[ARGS]..."] if path else ["[OPTIONS]", "COMMAND", "[ARGS]..."]
        return " ".join(pieces)
    pieces.append("[OPTIONS]")
    for param in command.params:
        if param.param_type_name == "argument":
            name = param.metavar or param.name.upper()
            name += "..." if param.nargs == -1 else ""
            pieces.append(name if param.required else f"[{name}]")
    return " ".join(pieces)


def _default(param: Any) -> str:
    if param.is_flag:
        if param.secondary_opts:
            return f"`{(param.opts if param.default else param.secondary_opts)[0]}`"
        return ""
    if param.required:
        return "required"
    value = param.default
    if value is None or value in ([], (), "") or callable(value):
        return ""
    if isinstance(value, (list, tuple)):
        value = " ".join(str(v) for v in value)
    return f"`{value}`"


_HELP_DEFAULT = re.compile(r"(?:\(|; |^)(?:repeatable; )?default:? (?P<value>[^;)]+?)(?=\)|;|\.(?:\s|$)|$)")


def _help_default(help_text: str | None) -> str:
    """The default a help text states in its first sentence (``(default 5)``, ``(repeatable; default X)``,
    ``; default: the first judge``) or in a sentence of its own (``Default: …``): a default the config or
    the environment supplies, which the option's own default (None) does not show."""
    sentences = re.split(r"(?<!e\.g)(?<!i\.e)\.\s", " ".join((help_text or "").split()))
    found = _HELP_DEFAULT.search(sentences[0]) or next(
        (m for sentence in sentences[1:] if (m := re.match(r"Default:? (?P<value>[^;]+)", sentence))), None)
    return _text(found.group("value").rstrip(".")) if found else ""


def _option_names(param: Any) -> str:
    """The option's names, one per line (a flag is never broken: ``docs/stylesheets/extra.css``)."""
    return "<br>".join(f"`{name}`" for name in [*param.opts, *param.secondary_opts])


def _type(param: Any) -> str:
    if param.is_flag:
        return "flag"
    metavar = param.metavar or ""
    kind = _text(metavar) if metavar else ""
    return f"{kind} (repeatable)" if param.multiple else kind


def reference(app: Any = None) -> str:
    """The CLI reference in Markdown: one section per command of ``app`` (default: personagraph's)."""
    import typer

    if app is None:
        from personagraph.cli import app
    root = typer.main.get_command(app)
    out: list[str] = []
    for path, command in commands(root):
        title = " ".join(["personagraph", *path])
        out += [f"{'#' * min(2 + max(len(path) - 1, 0), 4)} {title}", ""]
        if command.help:
            out += [_text(command.help), ""]
        out += ["```text", _usage(path, command), "```", ""]
        subs = getattr(command, "commands", None)
        if subs:
            out += ["| command | what it does |", "|---|---|"]
            for name, sub in sorted(subs.items()):
                anchor = re.sub(r"[^a-z0-9-]", "", "-".join(["personagraph", *path, name]).lower())
                summary = _text(sub.get_short_help_str(120))
                out.append(f"| [`{' '.join([*path, name])}`](#{anchor}) | {summary} |")
            out.append("")
        arguments = [p for p in command.params if p.param_type_name == "argument"]
        if arguments:
            out += ["| argument | description |", "|---|---|"]
            for param in arguments:
                name = (param.metavar or param.name.upper()) + ("..." if param.nargs == -1 else "")
                out.append(f"| `{name}` | {_text(getattr(param, 'help', ''))} |")
            out.append("")
        options = [p for p in command.params if p.param_type_name == "option" and not p.hidden]
        if options:
            out += ["| option | type | description | default |", "|---|---|---|---|"]
            for param in options:
                cells = (_option_names(param), _type(param), _text(param.help),
                         _default(param) or _help_default(param.help))
                out.append("| " + " | ".join(cells) + " |")
            out.append("")
    return "\n".join(out)


_ROLE = re.compile(r":(?:class|func|meth|attr|data|mod|exc|obj):`(~?)([^`]+)`")


def _plain_roles(text: str) -> str:
    """``:class:`~a.b.C``` → ```C```, ``:func:`a.b```  → ```a.b```."""
    return _ROLE.sub(lambda m: f"`{m.group(2).rsplit('.', 1)[-1] if m.group(1) else m.group(2)}`", text)


try:
    from griffe import Extension
except ImportError:  # the hook runs without griffe too (python docs/hooks.py)
    Extension = object  # type: ignore[assignment,misc]


def _trailing_comment(line: str) -> str | None:
    """The ``# comment`` ending a line of code (None if there is none; a ``#`` in a string is no comment)."""
    comments = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(line.strip()).readline):
            if token.type == tokenize.COMMENT:
                comments.append(token.string)
    except (tokenize.TokenError, SyntaxError):
        pass  # the first line of a statement that goes on (a multi-line Field(...)): its comments so far
    return comments[-1].lstrip("#").strip() if comments else None


class SphinxRoles(Extension):  # type: ignore[misc,valid-type]
    """Griffe extension: Sphinx cross-reference roles in docstrings become code spans, and a class field
    without a docstring gets its trailing comment as one (``seed: int = 0  # seed for sampling``), the way
    the package documents its config and summary fields."""

    def on_instance(self, *, obj: Any, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _plain_roles(obj.docstring.value)
        elif obj.is_attribute and obj.parent is not None and obj.parent.is_class:
            lines = obj.lines
            if lines and (comment := _trailing_comment(lines[0])):
                from griffe import Docstring

                obj.docstring = Docstring(_plain_roles(comment), parent=obj)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Fills the CLI reference into the page that holds :data:`MARKER`."""
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, reference())


if __name__ == "__main__":  # python docs/hooks.py > cli.md: the page as the build sees it
    print(reference())
