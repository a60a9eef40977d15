"""Validity cards: a finished benchmark meta-eval saves one per judge, and eval, simulate, view, the report and
a persona test's failure message show it in one line per judge; a judge without a card, or with a card of
another protocol or rubric, is shown as not measured, with the command that measures it."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from personagraph import evaluate, meta_evaluate
from personagraph.cli import app
from personagraph.judges.cards import Card, all_cards, find_card, user_cards, validity_line
from personagraph.judges.protocols import get_protocol
from personagraph.report.html import build_report
from personagraph.report.load import load_run
from personagraph.report.view import view
from personagraph.testing import PersonaAssertionError, PersonaTester

PERSONA = "A retired cowboy from Texas"
NOT_MEASURED = "not measured against people: run `personagraph meta-eval --benchmark persona -j test:judge`"


def usr_copy(root: Path) -> Path:
    """A local copy of USR's file with 12 rated replies (a subset, as --benchmark-dir allows)."""
    contexts = []
    for c in range(4):
        responses = [
            {"response": text, "Uses Knowledge": [k, k, 1 - k], "Overall": [o, o, 3]}
            for text, k, o in (
                ("i ride horses on my ranch", 1, 5),
                ("ok", 0, 2),
                (f"cattle drives were my life {c}", 1, 4),
            )
        ]
        contexts.append(
            {
                "context": f"hello\nwhat do you do for fun {c} ?",
                "fact": "your persona: i ride horses.\nyour persona: i live on a ranch.\n",
                "responses": responses,
            }
        )
    (root / "usr").mkdir(parents=True)
    (root / "usr" / "pc_usr_data.json").write_text(json.dumps(contexts))
    return root


@pytest.fixture
def measured(tmp_path: Path) -> Card:
    summary = meta_evaluate(
        benchmark="usr-personachat",
        benchmark_dir=str(usr_copy(tmp_path / "bench")),
        judges=["test:judge"],
        run_dir=tmp_path / "meta",
        n_resamples=100,
    )
    assert len(summary.cards) == 1 and Path(summary.cards[0]).parent == user_cards()
    assert summary.llm_calls == 12  # a reply rated on two scales is judged once
    card = find_card("test:judge", get_protocol(None, "test:judge"))
    assert card is not None
    return card


def test_a_benchmark_run_saves_a_card_with_each_subsets_figure(measured: Card) -> None:
    figures = measured.criteria["persona_consistency"].figures
    assert [f.section for f in figures] == ["usr-personachat/uses_knowledge", "usr-personachat/overall"]
    assert all(f.n == 12 and f.spearman is not None and f.ci_low is not None for f in figures)
    assert "local copies in" in measured.data and measured.sample is None


def test_eval_view_report_and_a_failing_persona_test_show_the_card(measured: Card, tmp_path: Path) -> None:
    summary = evaluate(
        PERSONA,
        models=["test:agent"],
        judges=["test:judge"],
        generator="test:gen",
        environments=1,
        questions_per_task=1,
        run_dir=tmp_path / "eval",
    )
    line = summary.judge_validity["test:judge"]
    assert line.startswith(
        "test:judge (rationale) vs people: Persona Consistency: usr-personachat uses knowledge ρ"
    )
    assert f"measured {measured.measured}" in line and "(n 12)" in line
    console = Console(file=io.StringIO(), width=200)
    console.print(view(load_run(tmp_path / "eval")))
    assert "judge test:judge (rationale) vs people" in console.file.getvalue()
    assert "Judge test:judge against people: test:judge (rationale) vs people" in build_report(
        [load_run(tmp_path / "eval")]
    )
    tester = PersonaTester("t::cards", tmp_path / "tests")
    with pytest.raises(PersonaAssertionError) as failed:
        tester.assert_persona("test:agent", PERSONA, judges=["test:judge"], min_score=5)
    assert "judge test:judge (rationale) vs people: Persona Consistency" in str(failed.value)


def test_without_a_card_every_view_says_how_to_measure_the_judge(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        [
            "eval",
            "--persona",
            PERSONA,
            "--model",
            "test:agent",
            "--judge",
            "test:judge",
            "--generator",
            "test:gen",
            "--environments",
            "1",
            "--questions-per-task",
            "1",
            "--run-dir",
            str(tmp_path / "eval"),
        ],
        env={"COLUMNS": "300"},
    )
    assert result.exit_code == 0, result.output
    assert f"⚠ judge test:judge (rationale): {NOT_MEASURED}" in result.output
    result = CliRunner().invoke(
        app,
        [
            "simulate",
            "--persona",
            PERSONA,
            "--turns",
            "2",
            "--model",
            "test:agent",
            "--user-model",
            "test:user",
            "--judge",
            "test:judge",
            "--run-dir",
            str(tmp_path / "sim"),
        ],
        env={"COLUMNS": "300"},
    )
    assert f"⚠ judge test:judge (rationale): {NOT_MEASURED}" in result.output, result.output


def test_a_card_of_another_protocol_or_rubric_is_not_used(measured: Card) -> None:
    protocol = get_protocol(None, "test:judge")
    path = next(Path(where) for card, where in all_cards() if card.judge == "test:judge")
    assert "vs people" in validity_line("test:judge", protocol, ["Persona Consistency"])
    assert NOT_MEASURED in validity_line(
        "test:judge", get_protocol("score", "test:judge"), ["Persona Consistency"]
    )
    edited = measured.model_copy(deep=True)
    edited.criteria["persona_consistency"].fingerprint = "an older rubric"
    path.write_text(edited.model_dump_json())
    assert "its card measured no criterion with these rubrics" in validity_line(
        "test:judge", protocol, ["Persona Consistency"]
    )
    edited.protocol = "rationale-0000"
    path.write_text(edited.model_dump_json())
    assert NOT_MEASURED in validity_line("test:judge", protocol, ["Persona Consistency"])
    path.write_text("{ damaged")
    assert NOT_MEASURED in validity_line("test:judge", protocol, ["Persona Consistency"])


def test_meta_eval_cards_lists_them(measured: Card) -> None:
    result = CliRunner().invoke(app, ["meta-eval", "--cards"], env={"COLUMNS": "200"})
    assert result.exit_code == 0 and "test:judge" in result.output and "Persona Consistency" in result.output


def test_view_and_report_of_a_benchmark_run_show_each_subset(measured: Card, tmp_path: Path) -> None:
    run = load_run(tmp_path / "meta")
    console = Console(file=io.StringIO(), width=250)
    console.print(view(run))
    shown = console.file.getvalue()
    assert "Judges against people (meta-eval)" in shown
    assert "usr-personachat/uses_knowledge" in shown and "usr-personachat/overall" in shown
    page = build_report([run])
    assert "Judges against people (meta-eval)" in page and "usr-personachat/overall" in page


def test_a_run_made_with_a_protocol_that_is_gone_is_unmeasured_not_an_error() -> None:
    from personagraph.judges.cards import validity_lines

    line = validity_lines(["test:judge"], "an-old-protocol", ["Persona Consistency"])["test:judge"]
    assert line == "test:judge (an-old-protocol): not measured against people (no such protocol now)"


def test_the_embedded_judge_ships_a_card_for_the_protocol_it_is_asked_with() -> None:
    """The quick run says what its score is worth: the packaged card matches the embedded judge's default
    protocol and rubrics as they are now (a change to either needs the card measured again)."""
    from personagraph.schemas import TASK_NAMES

    judge = "local:qwen2.5-coder-1.5b"
    line = validity_line(judge, get_protocol(None, judge), list(TASK_NAMES))
    assert "vs people: Linguistic Habits" in line and "Persona Consistency" in line, (
        f"{line}\nthe card in personagraph/judges/cards/ was measured with another protocol or rubric: run "
        "`personagraph meta-eval --benchmark persona --benchmark-dir ../shared/benchmarks/judge-dev/raw "
        f"--sample 30 -j {judge}` and copy the card it saves there (its data labelled as development halves)"
    )
    assert "development halves" in line and "(n 30)" in line
