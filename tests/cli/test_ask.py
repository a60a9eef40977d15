"""``personagraph ask`` prints the answer, and says when the token limit cut it off."""

from __future__ import annotations

from typer.testing import CliRunner

from personagraph.cli import app
from personagraph.models.testing import register_script


def test_an_answer_cut_at_the_token_limit_says_so_and_a_whole_one_does_not() -> None:
    register_script("long-winded", lambda messages, schema: "I rode the range for forty years " * 10)
    register_script("brief", lambda messages, schema: "Howdy, partner.")
    asked = ["ask", "-p", "A cowboy", "--model", "test:long-winded", "--max-tokens", "16", "hi"]
    cut = CliRunner().invoke(app, asked, env={"COLUMNS": "200"})
    assert cut.exit_code == 0, cut.output
    assert "I rode the range" in cut.output
    assert "(cut off at the 16-token limit: --max-tokens raises it)" in cut.output
    whole = CliRunner().invoke(app, ["ask", "-p", "A cowboy", "--model", "test:brief", "hi"],
                               env={"COLUMNS": "200"})
    assert whole.exit_code == 0 and "Howdy, partner." in whole.output and "cut off" not in whole.output
