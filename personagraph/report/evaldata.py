"""Eval runs, joined for reading: items (question, answer, every verdict) and the headline numbers.

Scores come from the rebuilt summary (``evaluate.build_summary``); what the summary does not break down —
failed verdicts and judge agreement per model and task — is computed here from the same records.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict
from typing import Any

from personagraph.judges.scoring import score_items, summarize_scores
from personagraph.judges.stats import krippendorff_alpha
from personagraph.report.load import Run
from personagraph.runs.eval import EvalConfig
from personagraph.schemas import TASK_NAMES, Answer, Persona, Verdict


def _config_personas(run: Run) -> list[Persona] | None:
    """The personas of the run's config; None when it has no list of them. A damaged or foreign config
    may hold anything: only entries of the form ``{"description": <a persona text>}`` count."""
    listed = run.config.get("personas")
    if not isinstance(listed, list):
        return None
    personas = []
    for entry in listed:
        if isinstance(entry, dict) and isinstance(entry.get("description"), str):
            try:
                personas.append(Persona(description=entry["description"]))
            except ValueError:
                continue
    return personas


def _in_config(run: Run) -> tuple[set[str] | None, set[str] | None, list[str]]:
    config = run.config
    listed = _config_personas(run)
    persona_ids = None if listed is None else {persona.id for persona in listed}
    models = set(run.summary.get("models", {})) or None
    judges = config.get("judges")  # a damaged or foreign config may hold anything: only a list counts
    if not isinstance(judges, list):
        judges = run.summary.get("judge_agreement", {}).get("judges") or []
    judges = [str(j) for j in judges]
    return persona_ids, models, judges


def items(run: Run) -> list[dict[str, Any]]:
    """One dict per answer of the run's config: model, task, persona, question, answer, score, verdicts.

    ``score`` is the item score as the run's summary has it (the mean of the parsed verdicts in the run's
    score kind; a non-answer's rubric minimum; None when no verdict parsed); ``verdicts`` lists every
    judge's verdict on the answer (score, rationale, status, error).
    """
    if "eval_items" not in run.cache:
        run.cache["eval_items"] = _items(run)
    return run.cache["eval_items"]


def _items(run: Run) -> list[dict[str, Any]]:
    persona_ids, models, judges = _in_config(run)
    questions = {q["id"]: q for q in run.rows("question")}
    personas = {s["persona_id"]: s.get("persona", s["persona_id"]) for s in run.rows("selection")}
    for persona in _config_personas(run) or []:
        personas.setdefault(persona.id, persona.description)
    verdicts: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for verdict in run.rows("verdict"):
        if not judges or verdict.get("judge") in judges:
            verdicts[verdict["answer_id"]].append(verdict)
    answers = [answer for answer in run.rows("answer")
               if (persona_ids is None or answer.get("persona_id") in persona_ids)
               and (models is None or answer.get("model") in models)]
    scores = _item_scores(run, answers, verdicts)
    out = []
    for answer in answers:
        found = sorted(verdicts.get(answer["id"], []), key=lambda v: judges.index(v["judge"]) if v["judge"] in judges else 99)
        question = questions.get(answer.get("question_id"), {})
        out.append({
            "answer_id": answer["id"],
            "question_id": answer.get("question_id"),
            "persona_id": answer.get("persona_id"),
            "persona": personas.get(answer.get("persona_id"), answer.get("persona_id")),
            "model": answer.get("model"),
            "task": answer.get("task"),
            "question": question.get("text", ""),
            "answer": answer.get("text", ""),
            "status": answer.get("status"),
            "error": answer.get("error"),
            "refusal": bool(answer.get("refusal")),
            "sample": answer.get("sample", 0),
            "score": scores.get(answer["id"]),
            "verdicts": found,
        })
    return out


def _item_scores(run: Run, answers: list[dict[str, Any]], verdicts: dict[str, list[dict[str, Any]]]
                 ) -> dict[str, float | None]:
    """Answer id → its item score as the run's summary scores it (its score kind and non-answer rule)."""
    kind = run.summary.get("score_kind", "integer")
    non_answers = run.summary.get("non_answers", "minimum")
    found = [Verdict.model_validate(v) for answer in answers for v in verdicts.get(answer["id"], [])]
    scored = score_items([Answer.model_validate(a) for a in answers], found, kind, non_answers)
    return {item.answer_id: item.score for item in scored}


def persona_scores(run: Run) -> dict[str, dict[str, float | None]]:
    """Persona description → model → PersonaScore over that persona's answers alone, computed as the run's
    summary computes a model's (:func:`~personagraph.judges.scoring.summarize_scores`, the run's scoring)."""
    config = EvalConfig.model_validate(run.config)
    answers = sorted((Answer.model_validate(a) for a in run.rows("answer")
                      if a.get("model") in config.models), key=lambda a: a.id)  # ids: as build_summary
    verdicts = sorted((Verdict.model_validate(v) for v in run.rows("verdict")
                       if v.get("judge") in config.judges), key=lambda v: v.id)
    benchmark = config.benchmark
    tasks = {t for qs in benchmark.values() for t in qs} if benchmark is not None else TASK_NAMES
    out = {}
    for persona in config.personas:
        mine = [a for a in answers if a.persona_id == persona.id]
        ids = {a.id for a in mine}
        scored = summarize_scores(mine, [v for v in verdicts if v.answer_id in ids], tasks=tasks,
                                  **asdict(config.scoring()))["models"]
        out[persona.description] = {model: scored.get(model, {}).get("persona_score")
                                    for model in config.models}
    return out


def _alpha(rows: list[dict[str, Any]], judges: list[str]) -> float | None:
    if len(judges) < 2:
        return None
    answered = [row for row in rows if row["status"] == "ok"]
    table = [
        [next((v["score"] for v in row["verdicts"] if v["judge"] == judge and v.get("status") == "ok"), None)
         for row in answered]
        for judge in judges
    ]
    return krippendorff_alpha(table) if answered else None


def headline(run: Run) -> list[dict[str, Any]]:
    """One row per model: task means and CIs, PersonaScore with its CI, refusal rate, failed verdicts, α.

    Keys: ``model``, ``tasks`` {task: {mean, ci, n, refusal_rate, failed_verdicts, judge_alpha}},
    ``persona_score``, ``ci`` ([low, high] or None), ``refusal_rate``, ``failed_verdicts``, ``verdicts``,
    ``judge_alpha`` (Krippendorff's α, ordinal, over the model's answers; None with one judge), ``answers``,
    ``failed_answers``, ``answers_at_token_limit``, ``manipulation_flags`` (answers flagged as grading
    themselves; None for runs older than these counts).
    """
    _, _, judges = _in_config(run)
    all_items = items(run)
    rows = []
    for model, result in run.summary.get("models", {}).items():
        model_items = [i for i in all_items if i["model"] == model]
        tasks = {}
        for task in TASK_NAMES:
            if task not in result.get("tasks", {}):
                continue
            stats = result["tasks"][task]
            task_items = [i for i in model_items if i["task"] == task]
            tasks[task] = {
                "mean": stats.get("mean"),
                "ci": stats.get("ci"),
                "n": stats.get("n"),
                "refusal_rate": stats.get("refusal_rate"),
                "failed_verdicts": sum(v.get("status") != "ok" for i in task_items for v in i["verdicts"]),
                "judge_alpha": _alpha(task_items, judges),
            }
        rows.append({
            "model": model,
            "tasks": tasks,
            "persona_score": result.get("persona_score"),
            "ci": result.get("ci"),
            "refusal_rate": result.get("refusal_rate"),
            "manipulation_flags": result.get("manipulation_flags"),  # answers grading themselves (None: older)
            "failed_verdicts": sum(v.get("status") != "ok" for i in model_items for v in i["verdicts"]),
            "verdicts": sum(len(i["verdicts"]) for i in model_items),
            "judge_alpha": _alpha(model_items, judges),
            "answers": result.get("answers"),
            "failed_answers": result.get("failed_answers"),
            "answers_at_token_limit": result.get("answers_at_token_limit"),
        })
    return rows


def score_field(run: Run) -> str:
    """The verdict field a run's item scores read: ``expected_score`` (probability-weighted) when its summary
    scored with the ``expected`` kind, else ``score`` (whole numbers) — so every view shows the summary's
    numbers."""
    return "expected_score" if run.summary.get("score_kind", "integer") == "expected" else "score"


def judges_of(run: Run) -> list[str]:
    return _in_config(run)[2]


def verdict_scores(run: Run) -> list[dict[str, Any]]:
    """Every parsed verdict score with its judge, model and task (for distributions)."""
    return [
        {"judge": v["judge"], "model": item["model"], "task": item["task"], "score": v["score"]}
        for item in items(run)
        for v in item["verdicts"]
        if v.get("status") == "ok" and v.get("score") is not None
    ]
