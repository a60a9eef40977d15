"""``score``, ``persobench``, ``behavior-alignment`` and ``longlamp`` end to end on small files, test model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from personagraph.cli import app

runner = CliRunner()

PERSOBENCH_CSV = """personas,context,act_response
"[User 1 persona]: ['i have a dog.' 'i like hiking.']",User1: what do you do on weekends?,I take my dog hiking in the hills.
"i am a nurse. i love cooking.",User1: what's for dinner?,I will cook pasta tonight.
"""
INSPIRED_TSV = "".join(
    "\t".join(row) + "\n" for row in [
        ("dialog_id", "speaker", "text", "expert_label"),
        ("d1", "RECOMMENDER", "Hello how are you today?", "no_strategy"),
        ("d1", "SEEKER", "I'm well, thanks", ""),
        ("d1", "RECOMMENDER", "What kind of movies do you like?", "opinion_inquiry"),
        ("d1", "SEEKER", "I love superhero movies.", ""),
        ("d1", "RECOMMENDER", "Me too, I love Marvel!", "similarity"),
        ("d2", "RECOMMENDER", "Hi there", "no_strategy"),
        ("d2", "SEEKER", "Hi, I want a comedy", ""),
        ("d2", "RECOMMENDER", "What was the last comedy you watched?", "experience_inquiry"),
    ]
)
LONGLAMP = [
    {"input": "Write a review of hiking boots.", "output": "Sturdy boots that kept my feet dry.",
     "profile": [{"reviewText": "Great tent.", "unixReviewTime": 1}, {"reviewText": "Boots fell apart.", "unixReviewTime": 2}]},
    {"input": "Write an abstract about retrieval.", "output": "We study retrieval.",
     "profile": [{"title": "Dense retrieval", "abstract": "Embeddings for search."}]},
]


def invoke(*args: str) -> Result:
    return runner.invoke(app, list(args), env={"COLUMNS": "160"})


def one_line_error(result: Result, *fragments: str) -> None:
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, result.output
    assert "Traceback" not in result.output
    for fragment in fragments:
        assert fragment in result.output.replace("\n", " "), (fragment, result.output)


def test_score_writes_one_line_per_record_in_order(tmp_path: Path) -> None:
    data = tmp_path / "in.jsonl"
    records = [
        {"response": "the cat sat", "reference": "the cat sat on the mat", "persona": ["i have a cat."], "id": "a"},
        {"response": "", "reference": "hello there", "persona": "i am shy.", "id": "b"},
        {"response": "a b a b", "reference": "a b", "persona": ["i like letters."], "id": "c"},
    ]
    data.write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "out.jsonl"
    result = invoke("score", "--input", str(data), "--metrics", "rouge,meteor,bertscore,dist,coverage",
                    "--output", str(out))
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [line["id"] for line in lines] == ["a", "b", "c"]
    keys = {"rouge1", "rouge2", "rougeL", "meteor", "bertscore_p", "bertscore_r", "bertscore_f1", "dist1", "dist2",
            "persona_coverage"}
    assert all(keys <= set(line) for line in lines)
    assert "c_score" not in lines[0]
    assert lines[0]["rouge1"] == pytest.approx(2 / 3) and lines[2]["dist1"] == pytest.approx(0.5)
    assert lines[1]["response"] == "" and all(lines[1][k] == 0.0 for k in keys)  # failure: worst values
    for text in ("rouge1", "bertscore_f1", "corpus_dist1", "failure ratio", "0.333 (1/3)", "all-MiniLM-L6-v2",
                 "not comparable to roberta-large"):
        assert text in result.output, text


def test_score_default_metrics_follow_the_fields(tmp_path: Path) -> None:
    data = tmp_path / "in.jsonl"
    data.write_text(json.dumps({"response": "a b c"}) + "\n")
    out = tmp_path / "out.jsonl"
    result = invoke("score", "--input", str(data), "--output", str(out))
    assert result.exit_code == 0, result.output
    assert set(json.loads(out.read_text())) == {"response", "dist1", "dist2"}


def test_score_bad_inputs(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    (tmp_path / "empty.jsonl").write_text("")
    one_line_error(invoke("score", "-i", str(tmp_path / "empty.jsonl"), "-o", str(out)), "empty.jsonl: empty file")
    (tmp_path / "bad.jsonl").write_text('{"response": "x", "reference": "y"}\n{"reference": "y"}\n')
    one_line_error(invoke("score", "-i", str(tmp_path / "bad.jsonl"), "-o", str(out), "--metrics", "rouge"),
                   "bad.jsonl line 2: missing field 'response'")
    (tmp_path / "noref.jsonl").write_text('{"response": "x", "reference": "y"}\n{"response": "x"}\n')
    one_line_error(invoke("score", "-i", str(tmp_path / "noref.jsonl"), "-o", str(out), "--metrics", "rouge"),
                   "noref.jsonl line 2: metric 'rouge' needs a non-empty 'reference'")
    one_line_error(invoke("score", "-i", str(tmp_path / "noref.jsonl"), "-o", str(out), "--metrics", "bleu"),
                   "unknown metric 'bleu'")
    one_line_error(invoke("score", "-i", str(tmp_path / "missing.jsonl"), "-o", str(out)), "missing.jsonl: no such file")


def test_score_nli_metrics_need_a_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PERSONAGRAPH_NLI_MODEL", raising=False)
    data = tmp_path / "in.jsonl"
    data.write_text(json.dumps({"response": "x", "reference": "y", "persona": ["z."]}) + "\n")
    one_line_error(invoke("score", "-i", str(data), "-o", str(tmp_path / "o.jsonl"), "--metrics", "c_score"),
                   "no NLI model configured", "--nli-model")


def test_persobench_runs_and_resumes(tmp_path: Path) -> None:
    data = tmp_path / "persobench.csv"
    data.write_text(PERSOBENCH_CSV)
    run_dir = tmp_path / "run"
    args = ("persobench", "--data", str(data), "--model", "test:default", "--cot", "--run-dir", str(run_dir))
    first = invoke(*args)
    assert first.exit_code == 0, first.output
    for text in ("PersoBench", "test:default", "cot", "2/2 items", "rouge1", "meteor", "bertscore_f1", "dist2",
                 "persona_coverage", "failure ratio", "response time", "c_score and ue_score skipped"):
        assert text in first.output, text
    summary = json.loads((run_dir / "persobench_summary.json").read_text())["test:default|cot"]
    assert summary["generated"] == 2 and summary["cost"]["failure_ratio"] == 0.0
    again = invoke(*args, "--limit", "1")
    assert again.exit_code == 0 and "LLM calls this run: 0" in again.output


def test_persobench_bad_inputs(tmp_path: Path) -> None:
    (tmp_path / "cols.csv").write_text("personas,context\na,b\n")
    one_line_error(invoke("persobench", "--data", str(tmp_path / "cols.csv"), "--model", "test:default",
                          "--run-dir", str(tmp_path / "r")), "cols.csv: missing column act_response")
    (tmp_path / "empty.csv").write_text("")
    one_line_error(invoke("persobench", "--data", str(tmp_path / "empty.csv"), "--model", "test:default",
                          "--run-dir", str(tmp_path / "r")), "empty.csv: empty file")
    (tmp_path / "ok.csv").write_text(PERSOBENCH_CSV)
    one_line_error(invoke("persobench", "--data", str(tmp_path / "ok.csv"), "--model", "nope:x",
                          "--run-dir", str(tmp_path / "r")), "nope:x")


def test_behavior_alignment_with_llm_labeller_and_classifier(tmp_path: Path) -> None:
    data = tmp_path / "inspired.tsv"
    data.write_text(INSPIRED_TSV)
    llm = invoke("behavior-alignment", "--dialogues", str(data), "--labeller", "test:default",
                 "--system", "test:default", "--run-dir", str(tmp_path / "llm"))
    assert llm.exit_code == 0, llm.output
    for text in ("Behavior alignment", "2 dialogues", "llm:test:default", "Cohen's κ", "BA of test:default",
                 "95% CI"):
        assert text in llm.output, text
    summary = json.loads((tmp_path / "llm" / "behavior_summary.json").read_text())
    assert summary["labelled_utterances"] == 5 and summary["responses"] == 3  # d1 turns 2, 3; d2 turn 2
    responses = tmp_path / "responses.jsonl"
    responses.write_text(json.dumps({"dialog_id": "d1", "turn": 2, "response": "What movies do you like?"}) + "\n")
    clf = invoke("behavior-alignment", "--dialogues", str(data), "--classifier", str(tmp_path / "clf.json"),
                 "--fit-classifier", str(data), "--responses", str(responses), "--run-dir", str(tmp_path / "clf"))
    assert clf.exit_code == 0, clf.output
    assert "classifier saved" in clf.output and (tmp_path / "clf.json").is_file()
    reuse = invoke("behavior-alignment", "--dialogues", str(data), "--classifier", str(tmp_path / "clf.json"),
                   "--run-dir", str(tmp_path / "clf2"))
    assert reuse.exit_code == 0, reuse.output


def test_behavior_alignment_bad_inputs(tmp_path: Path) -> None:
    bad = tmp_path / "bad.tsv"
    bad.write_text(INSPIRED_TSV.replace("similarity", "flattery"))
    one_line_error(invoke("behavior-alignment", "--dialogues", str(bad), "--labeller", "test:default",
                          "--run-dir", str(tmp_path / "r")),
                   "bad.tsv row 5: label 'flattery' is not one of the 14 strategies")
    cols = tmp_path / "cols.tsv"
    cols.write_text("speaker\ttext\nRECOMMENDER\thi\n")
    one_line_error(invoke("behavior-alignment", "--dialogues", str(cols), "--labeller", "test:default",
                          "--run-dir", str(tmp_path / "r")), "cols.tsv: missing column expert_label")
    empty = tmp_path / "empty.tsv"
    empty.write_text("")
    one_line_error(invoke("behavior-alignment", "--dialogues", str(empty), "--labeller", "test:default",
                          "--run-dir", str(tmp_path / "r")), "empty.tsv: empty file")
    good = tmp_path / "good.tsv"
    good.write_text(INSPIRED_TSV)
    one_line_error(invoke("behavior-alignment", "--dialogues", str(good), "--run-dir", str(tmp_path / "r")),
                   "exactly one of --labeller SPEC or --classifier PATH")


def test_longlamp_runs_each_retriever(tmp_path: Path) -> None:
    data = tmp_path / "longlamp.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in LONGLAMP))
    for retriever in ("bm25", "dense", "recency", "random"):
        result = invoke("longlamp", "--data", str(data), "--model", "test:default", "--retriever", retriever,
                        "--k", "1", "--run-dir", str(tmp_path / "run"))
        assert result.exit_code == 0, result.output
        for text in ("LongLaMP", f"{retriever} k=1", "2/2 items", "rouge1", "rougeL", "meteor", "failure ratio"):
            assert text in result.output, text
    summaries = json.loads((tmp_path / "run" / "longlamp_summary.json").read_text())
    assert len(summaries) == 4


def test_longlamp_bad_inputs(tmp_path: Path) -> None:
    data = tmp_path / "bad.jsonl"
    data.write_text(json.dumps({"input": "x", "output": "y"}) + "\n")
    one_line_error(invoke("longlamp", "--data", str(data), "--model", "test:default", "--run-dir", str(tmp_path / "r")),
                   "bad.jsonl line 1: missing field 'profile'")
    good = tmp_path / "good.jsonl"
    good.write_text(json.dumps(LONGLAMP[0]) + "\n")
    one_line_error(invoke("longlamp", "--data", str(good), "--model", "test:default", "--retriever", "tfidf",
                          "--run-dir", str(tmp_path / "r")), "--retriever 'tfidf'")
