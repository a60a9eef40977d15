"""personagraph.terminal: untrusted text reaches the terminal inert."""

import io

import pytest
from rich.console import Console
from rich.text import Text

from personagraph.terminal import neutralise, plain


def _printed(*renderables) -> str:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, color_system=None, width=200)
    for r in renderables:
        console.print(r)
    return out.getvalue()


@pytest.mark.parametrize(("raw", "shown"), [
    ("\x1b[2J\x1b[H", "\\x1b[2J\\x1b[H"),  # clear screen
    ("\x1b]0;pwned\x07", "\\x1b]0;pwned\\x07"),  # window title
    ("\x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\", "\\x1b]8;;http://evil\\x1b\\link\\x1b]8;;\\x1b\\"),  # OSC 8
    ("\x9b31m", "\\x9b31m"),  # C1 CSI
    ("a\rb\x08c", "a\\x0db\\x08c"),
    ("abc\u202edcba", "abc\\u202edcba"),
    ("line 1\n\tline 2", "line 1\n\tline 2"),
])
def test_control_characters_become_visible_escapes(raw: str, shown: str) -> None:
    assert neutralise(raw) == shown
    assert "\x1b" not in _printed(plain(raw)) and "\x07" not in _printed(plain(raw))


def test_markup_in_untrusted_text_prints_as_typed() -> None:
    text = "A gamer who types [/] a lot [bold]not bold[/bold] [link=http://x]y[/link]"
    assert _printed(plain("agent> ", text)).strip() == f"agent> {text}"


def test_styled_parts_keep_their_style() -> None:
    line = plain(Text("agent> ", style="bold cyan"), "[red]hi")
    assert line.plain == "agent> [red]hi" and line.spans[0].style == "bold cyan"
