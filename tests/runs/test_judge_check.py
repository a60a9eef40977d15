"""The judge-check run on the test models: flags a random judge, passes a perfect one, resumes, saves."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from personagraph.errors import PersonagraphError
from personagraph.judges.validity import VARIANT_KINDS, contrast_personas
from personagraph.models.testing import register_script
from personagraph.report.html import build_report
from personagraph.report.load import load_run
from personagraph.report.sections import judge_validity_tables
from personagraph.report.view import render_summary
from personagraph.resources import read_yaml
from personagraph.runs import eval as eval_run
from personagraph.runs.judge_check import (
    EVAL_SUBDIR,
    SUMMARY_FILE,
    VARIANT_KIND,
    VERDICT_KIND,
    JudgeCheckConfig,
    run_sync,
)
from personagraph.store import RunStore

COWBOY = "A 70-year-old retired cowboy from Texas who breaks horses"
NURSE = "A pediatric nurse in Oslo who knits on night shifts"
ANSWERS = {
    COWBOY: [
        "I ride out at dawn to check the cattle.",
        "Nothing beats a saddle and open range.",
        "My knees ache from forty years of rodeo.",
    ],
    NURSE: [
        "After my shift I knit scarves for the ward.",
        "Children are braver than adults with needles.",
        "The fjord is calm when I bike home at six.",
    ],
}
GENERIC = "People do many different things."
CONTRA = "Honestly, I am a banker from Paris."
DISCLOSURES = read_yaml("judges/variant_text.yaml")["disclosures"]


def write_items(path: Path, extra: list[dict[str, Any]] | None = None) -> Path:
    rows = [
        {
            "id": f"{i}-{j}",
            "persona": persona,
            "question": "What is your day like?",
            "response": text,
            "criterion": "expected_action",
            "human": [5],
            "scale": [1, 5],
        }
        for i, (persona, texts) in enumerate(ANSWERS.items())
        for j, text in enumerate(texts)
    ]
    rows += extra or []
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def _generator(messages: list[dict[str, Any]], schema: dict[str, Any] | None) -> str:
    if schema is not None:
        reply = {"attribute": "job", "persona_says": "x", "answer_says": "banker", "answer": CONTRA}
        return json.dumps(reply)
    return GENERIC


def _perfect_judge(messages: list[dict[str, Any]], schema: dict[str, Any] | None) -> str:
    """Scores by what it knows of the test data: in-persona answers 5, everything else low."""
    text = "\n".join(str(m["content"]) for m in messages)
    personas = [p for p in [*ANSWERS, *contrast_personas()] if p in text]
    owner = next((p for p, texts in ANSWERS.items() if any(t in text for t in texts)), None)
    if any(d in text for d in DISCLOSURES) or CONTRA in text:
        score = 1
    elif GENERIC in text:
        score = 2
    else:
        score = 5 if personas == [owner] else 1
    return json.dumps({"rationale": "scripted", "score": score})


register_script("jc-gen", _generator)
register_script("jc-perfect", _perfect_judge)


def check(tmp_path: Path, name: str = "check", **fields: Any) -> Any:
    items = write_items(tmp_path / "items.jsonl")
    base = {"items": str(items), "generator": "test:jc-gen", "n_resamples": 200}
    return run_sync(JudgeCheckConfig(**(base | fields)), tmp_path / name)


def test_a_perfect_judge_passes(tmp_path: Path) -> None:
    summary = check(tmp_path, judges=["test:jc-perfect"])
    result = summary.results["test:jc-perfect"]
    assert result.verdict == "pass" and result.reasons == [] and result.notes == [], result.line
    assert list(result.variants) == list(VARIANT_KINDS)
    for kind in ("swap", "generic", "contradiction"):
        assert result.variants[kind].auc == 1.0 and result.variants[kind].pairwise_accuracy.value == 1.0
        assert result.variants[kind].n == 6
    assert result.variants["disclosure"].caught == 1.0
    assert result.variants["padding"].mean_change.value == 0
    assert summary.complete and summary.n_items == 6


def test_the_baselines_are_scored_on_the_same_variants(tmp_path: Path) -> None:
    summary = check(tmp_path, judges=["test:jc-perfect"])
    assert set(summary.baselines) == {"length", "word_overlap", "embedding_similarity"}
    length = summary.baselines["length"]
    assert set(length) == set(VARIANT_KINDS) and length["swap"].n == 6
    assert length["swap"].auc == 0.5  # the same answer against another persona: the same length
    assert length["padding"].auc == 0.0  # padding always lengthens: a length counter rewards it
    assert summary.baselines["word_overlap"]["swap"].auc >= 0.5  # the swapped persona shares no word
    tables = judge_validity_tables(summary.model_dump(mode="json"))
    assert tables[-1].title.startswith("Baselines") and len(tables[-1].rows) == len(VARIANT_KINDS)


def test_contradictions_written_in_the_items_file_are_judged_and_the_generator_is_not_asked(
        tmp_path: Path) -> None:
    items = write_items(tmp_path / "items.jsonl")
    rows = [json.loads(line) for line in items.read_text().splitlines()]
    items.write_text("".join(json.dumps(row | {"contradiction": CONTRA}) + "\n" for row in rows))
    config = JudgeCheckConfig(items=str(items), generator="test:down", judges=["test:jc-perfect"],
                              variants=["contradiction"], n_resamples=200)
    summary = run_sync(config, tmp_path / "written")  # "down" fails every call it gets
    assert summary.complete and summary.failures == [] and summary.roles.get("variant_gen") is None
    assert summary.results["test:jc-perfect"].variants["contradiction"].auc == 1.0
    store = RunStore(tmp_path / "written")
    variants = store.records(VARIANT_KIND)
    store.close()
    assert len(variants) == 6 and {v["detail"] for v in variants} == {"written by hand (items file)"}


def test_a_judge_that_scores_at_random_is_flagged(tmp_path: Path) -> None:
    summary = check(tmp_path, judges=["test:jc-random", "test:jc-perfect"])
    random_judge = summary.results["test:jc-random"]
    assert random_judge.verdict == "warn"
    assert any("AI disclosures" in reason for reason in random_judge.reasons)
    assert summary.results["test:jc-perfect"].verdict == "pass"
    written = json.loads((tmp_path / "check" / SUMMARY_FILE).read_text())
    assert written["results"]["test:jc-random"]["verdict"] == "warn"
    assert written["results"]["test:jc-random"]["line"].startswith("test:jc-random: WARN")


def test_variants_are_saved_deterministic_and_seeded(tmp_path: Path) -> None:
    check(tmp_path, "a", judges=["test:jc-perfect"])
    check(tmp_path, "b", judges=["test:jc-perfect"])
    check(tmp_path, "c", judges=["test:jc-perfect"], seed=5)

    def variants(name: str) -> dict[str, dict[str, Any]]:
        store = RunStore(tmp_path / name, readonly=True)
        try:
            return {v["id"]: v for v in store.records(VARIANT_KIND)}
        finally:
            store.close()

    first = variants("a")
    assert len(first) == 6 * len(VARIANT_KINDS)
    assert {v["kind"] for v in first.values()} == set(VARIANT_KINDS)
    assert first == variants("b")
    other = variants("c")
    texts = lambda found: sorted((v["kind"], v["persona"], v["response"]) for v in found.values())  # noqa: E731
    assert texts(first) != texts(other)


def test_a_finished_check_resumes_with_no_calls(tmp_path: Path) -> None:
    first = check(tmp_path, judges=["test:jc-perfect", "test:j2"])
    assert first.llm_calls > 0
    again = check(tmp_path, judges=["test:jc-perfect", "test:j2"])
    assert again.llm_calls == 0
    assert again.results["test:j2"].model_dump() == first.results["test:j2"].model_dump()


def test_unparsable_verdicts_are_counted_kept_and_not_asked_again(tmp_path: Path) -> None:
    summary = check(tmp_path, judges=["test:broken"], variants=["swap", "padding"])
    assert summary.failed_verdicts == 18 and not summary.complete and summary.exit_code == 3
    assert {f.stage for f in summary.failures} == {"verdicts"}
    result = summary.results["test:broken"]
    assert result.verdict == "warn" and result.reasons == ["swap: no scored pairs"]
    assert result.variants["swap"].failed_verdicts == 12 and result.variants["swap"].n == 0
    store = RunStore(tmp_path / "check", readonly=True)
    try:
        assert all(v["status"] == "failed" and v["raw"] for v in store.records(VERDICT_KIND))
    finally:
        store.close()
    assert check(tmp_path, judges=["test:broken"], variants=["swap", "padding"]).llm_calls == 0


def test_low_rated_records_are_left_out(tmp_path: Path) -> None:
    low = {
        "id": "low",
        "persona": NURSE,
        "question": "q",
        "response": "I like trains.",
        "criterion": "expected_action",
        "human": [1, 2],
        "scale": [1, 5],
    }
    items = write_items(tmp_path / "with_low.jsonl", [low])
    summary = check(tmp_path, items=str(items), judges=["test:jc-perfect"], variants=["swap"])
    assert summary.n_items == 6 and summary.skipped == 1


def test_from_an_eval_run(tmp_path: Path) -> None:
    config = eval_run.EvalConfig(
        personas=[COWBOY, NURSE],
        models=["test:agent"],
        judges=["test:j1"],
        generator="test:gen",
        environments=2,
        questions_per_task=2,
    )
    eval_run.run_sync(config, tmp_path / "eval")
    summary = run_sync(
        JudgeCheckConfig(from_run=str(tmp_path / "eval"), per_task=3, n_resamples=200), tmp_path / "check"
    )
    assert summary.judges == ["test:j1"] and summary.generator == "test:gen"  # the run's roles
    assert summary.n_items == 5 * 3  # 4 answers per task, 3 chosen
    store = RunStore(tmp_path / "eval", readonly=True)
    answers = {a["id"] for a in store.records("answer")}
    store.close()
    check_store = RunStore(tmp_path / "check", readonly=True)
    items = check_store.records("check_item")
    assert {i["id"] for i in items} <= answers and len({i["task"] for i in items}) == 5
    swaps = [v for v in check_store.records(VARIANT_KIND) if v["kind"] == "swap"]
    check_store.close()
    # two personas sharing no content word: each answer is judged against the other one
    assert {v["persona"] for v in swaps} == {COWBOY, NURSE}
    assert all(v["detail"] == "persona from the input" for v in swaps)
    assert set(summary.results["test:j1"].variants) == set(VARIANT_KINDS)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({}, "exactly one of"),
        ({"from_run": "x", "items": "y"}, "exactly one of"),
        ({"items": "y", "variants": []}, "at least one"),
    ],
)
def test_config_needs_one_source(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        JudgeCheckConfig(**fields)


def test_bad_inputs_are_one_line_errors(tmp_path: Path) -> None:
    def error(**fields: Any) -> str:
        with pytest.raises(PersonagraphError) as info:
            run_sync(JudgeCheckConfig(**fields), tmp_path / "check")
        assert "\n" not in str(info.value)
        return str(info.value)

    assert "not a run directory" in error(from_run=str(tmp_path / "missing"))
    other = tmp_path / "other"
    check(tmp_path, "other", judges=["test:jc-perfect"], variants=["swap"])
    assert "holds a judge-check run, not an eval run" in error(from_run=str(other))
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "1", "persona": "p", "response": "r", "criterion": "nope", "human": 5}\n')
    assert "unknown criterion 'nope'" in error(items=str(bad))
    assert "no such file" in error(items=str(tmp_path / "none.jsonl"))
    items = write_items(tmp_path / "items.jsonl")
    assert "nope:x" in error(items=str(items), judges=["nope:x"])


@pytest.mark.embedded
def test_the_embedded_judge_runs_a_disclosure_check(tmp_path: Path) -> None:
    """One answer and its AI disclosure through the real default judge: both verdicts are stored, and the
    disclosure is caught (Persona Consistency's evidence verdict reads its gate from the text: no call)."""
    items = tmp_path / "one.jsonl"
    row = {
        "id": "1",
        "persona": COWBOY,
        "question": "What do you do at dawn?",
        "response": ANSWERS[COWBOY][0],
        "criterion": "persona_consistency",
        "human": [5],
    }
    items.write_text(json.dumps(row) + "\n")
    config = JudgeCheckConfig(
        items=str(items),
        judges=["local:qwen2.5-coder-1.5b"],
        variants=["disclosure"],
        n_resamples=100,
        max_judge_tokens=200,
    )
    summary = run_sync(config, tmp_path / "check")
    stats = summary.results["local:qwen2.5-coder-1.5b"].variants["disclosure"]
    assert stats.n == 1 and stats.failed_verdicts == 0 and summary.llm_calls == 0
    assert stats.caught == 1.0


def eval_with_check(run_dir: Path, judge: str, questions_per_task: int) -> tuple[Any, dict[str, Any], str]:
    """An eval run with ``judge_check=1``: its summary, summary.json and the terminal table's text."""
    config = eval_run.EvalConfig(personas=[COWBOY], models=["test:agent"], judges=[judge],
                                 generator="test:gen", environments=2, questions_per_task=questions_per_task,
                                 judge_check=1)
    summary = eval_run.run_sync(config, run_dir)
    written = json.loads((run_dir / "summary.json").read_text())
    console = Console(width=200, record=True)
    console.print(render_summary(written))
    return summary, written, " ".join(console.export_text().split())


def test_eval_with_judge_check_reports_the_figures(tmp_path: Path) -> None:
    summary, written, terminal = eval_with_check(tmp_path / "eval", "test:j1", 2)
    check = summary.model_dump(mode="json")["judge_check"]
    assert check["n_items"] == 5 and check["results"]["test:j1"]["verdict"] in ("pass", "warn")
    assert written["judge_check"]["results"] == check["results"]
    assert (tmp_path / "eval" / EVAL_SUBDIR / SUMMARY_FILE).is_file()
    html = build_report([load_run(tmp_path / "eval")])
    assert "<h3>Judge validity</h3>" in html and "Judge validity: test:j1" in html
    assert "judge validity: test:j1:" in terminal
    again, _, _ = eval_with_check(tmp_path / "eval", "test:j1", 2)
    assert again.llm_calls == 0 and again.model_dump(mode="json")["judge_check"]["llm_calls"] == 0


def test_a_flagged_judge_is_warned_about_beside_the_persona_score(tmp_path: Path) -> None:
    _, _, terminal = eval_with_check(tmp_path / "eval", "test:jc-random", 1)
    html = build_report([load_run(tmp_path / "eval")])
    assert '<p class="bad">⚠ Judge validity of' in html and "test:jc-random: WARN" in html
    assert "⚠ judge validity: test:jc-random: WARN — swap AUC" in terminal
