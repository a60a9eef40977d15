"""Report sections for the non-eval run kinds: sessions, memory, metric runs.

Each builder takes a loaded run and the page and returns HTML, or "" when the run has none of its data.
Record shapes are read defensively (``.get``): a run written by an older or newer version renders what it
can rather than failing the whole report.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import numpy as np

from personagraph.report import charts
from personagraph.report.load import BEHAVIOR_KINDS, Run
from personagraph.report.markup import esc, kv_html, table_html
from personagraph.report.tables import Column, Table
from personagraph.runs.judge_check import SUMMARY_FILE

Builder = Callable[[Run, Any], str]


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return float(value) if np.isfinite(value) else None
    return None


# --- sessions -------------------------------------------------------------------------------------------
# Shapes: personagraph/sessions.py (module docstring) — ``session`` records with turns whose assistant
# entries carry ``scores: {judge: {task: int|None}}``, ``break: {turn, level, source, marker}|None``,
# ``drift_slope`` and ``session_verdict`` (consistency, contradictions, …).
def _turn_mean(entry: dict[str, Any]) -> float | None:
    values = [float(v) for by_task in (entry.get("scores") or {}).values() if isinstance(by_task, dict)
              for v in by_task.values() if _num(v) is not None]
    return float(np.mean(values)) if values else None


def sessions(run: Run) -> list[dict[str, Any]]:
    """Session records, each with ``turn_scores`` [(turn, mean over judges and criteria)] added."""
    out = []
    for record in run.rows("session"):
        turns = [t for t in record.get("turns") or [] if isinstance(t, dict)]
        points = [(t.get("index"), _turn_mean(t)) for t in turns if t.get("role") == "assistant"]
        out.append({**record, "turns": turns, "turn_scores": [(x, y) for x, y in points if y is not None]})
    return out


def _mode(record: dict[str, Any]) -> str:
    return "adversarial" if record.get("adversarial") else "normal"


def session_label(record: dict[str, Any], index: int) -> str:
    persona = " ".join(str(record.get("persona") or f"session {index + 1}").split())
    persona = persona if len(persona) <= 40 else persona[:39] + "…"
    return f"{index + 1}. {persona}" + (" · adversarial" if record.get("adversarial") else "")


def _break_text(brk: dict[str, Any] | None) -> str:
    if not brk:
        return "none"
    text = f"turn {brk.get('turn')}"
    if brk.get("level") is not None:
        text += f", level {brk['level']}"
    if brk.get("source"):
        text += f" ({brk['source']}" + (f": {brk['marker']}" if brk.get("marker") else "") + ")"
    return text


def _verdict(record: dict[str, Any]) -> dict[str, Any]:
    verdict = record.get("session_verdict")
    return verdict if isinstance(verdict, dict) else {}


def _mean_or_none(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return float(np.mean(present)) if present else None


def session_rows(run: Run) -> list[dict[str, Any]]:
    rows = []
    for index, record in enumerate(sessions(run)):
        scores = [y for _, y in record["turn_scores"]]
        verdict = _verdict(record)
        rows.append({
            "session": session_label(record, index),
            "agent": record.get("agent") or record.get("model"),
            "mode": _mode(record),
            "status": record.get("status"),
            "turns": sum(t.get("role") == "assistant" for t in record["turns"]),
            "mean": _mean_or_none(scores),
            "drift_slope": _num(record.get("drift_slope")),
            "consistency": _num(verdict.get("consistency")),
            "contradictions": _num(verdict.get("n_contradictions")),
            "break": _break_text(record.get("break")),
            "broke": bool(record.get("break")),
            "break_turn": (record.get("break") or {}).get("turn"),
            "stop_reason": record.get("stop_reason"),
        })
    return rows


def session_detail_table(run: Run) -> Table | None:
    rows = session_rows(run)
    if not rows:
        return None
    return Table("Sessions", [
        Column("session", "session"), Column("agent", "agent"), Column("status", "status"),
        Column("turns", "agent turns", "int"), Column("mean", "mean turn score", "score"),
        Column("drift_slope", "drift / turn", "slope"), Column("consistency", "session consistency", "score"),
        Column("contradictions", "contradictions", "float"), Column("break", "first break"),
        Column("stop_reason", "stop reason"),
    ], rows)


def session_table(run: Run) -> Table | None:
    """The sessions' headline: per agent and mode, means over the sessions."""
    rows = session_rows(run)
    if not rows:
        return None
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[(str(row["agent"] or "—"), row["mode"])].append(row)
    out = []
    for (agent, mode), members in groups.items():
        finished = [m for m in members if m["status"] in (None, "finished")]
        breaks = [m for m in finished if m["broke"]]
        out.append({
            "agent": agent, "mode": mode, "sessions": len(members), "finished": len(finished),
            "mean": _mean_or_none([m["mean"] for m in members]),
            "drift_slope": _mean_or_none([m["drift_slope"] for m in members]),
            "consistency": _mean_or_none([m["consistency"] for m in members]),
            "contradictions": _mean_or_none([m["contradictions"] for m in members]),
            "break_rate": len(breaks) / len(finished) if finished else None,
            "first_break": _mean_or_none([float(m["break_turn"]) for m in breaks if m["break_turn"] is not None]),
        })
    return Table("Sessions by agent", [
        Column("agent", "agent"), Column("mode", "mode"), Column("sessions", "sessions", "int"),
        Column("finished", "finished", "int"), Column("mean", "mean turn score", "score"),
        Column("drift_slope", "drift / turn", "slope"), Column("consistency", "session consistency", "score"),
        Column("contradictions", "contradictions / session", "float"), Column("break_rate", "break rate", "pct"),
        Column("first_break", "first break turn", "float"),
    ], out, note="Turn score = mean over judges and criteria (1–5) of an agent turn. Drift = least-squares slope "
                 "of the turn scores per turn (negative: the persona fades). Session consistency = the session "
                 "judges' verdict (1–5). Break = an agent turn out of character (a persona-break phrase, or "
                 "every judge scoring Persona Consistency 1); break rate over finished sessions.")


def _turn_html(entry: dict[str, Any], broke: bool) -> str:

    meta = []
    if entry.get("level") is not None:
        meta.append(f"level {entry['level']}")
    if entry.get("status") not in (None, "ok"):
        meta.append(f"{entry['status']}: {entry.get('error') or ''}".strip(": "))
    for judge, by_task in (entry.get("scores") or {}).items():
        if isinstance(by_task, dict):
            meta.append(f"{judge}: " + ", ".join(f"{k} {'—' if v is None else v}" for k, v in by_task.items()))
    if entry.get("at_token_limit"):
        meta.append("cut at token limit")
    if entry.get("refusal_marker"):
        meta.append(f"persona-break phrase: {entry['refusal_marker']}")
    rationales = [f"{judge} · {task}: {text}" for judge, by_task in (entry.get("rationales") or {}).items()
                  if isinstance(by_task, dict) for task, text in by_task.items() if text]
    extra = "".join(f'<div class="text muted">{esc(r)}</div>' for r in rationales)
    return (f'<div class="turn{" break" if broke else ""}"><div class="who">#{esc(entry.get("index"))} '
            f'{esc(entry.get("role"))}{" · " + esc(" · ".join(meta)) if meta else ""}{" · BREAK" if broke else ""}'
            f'</div><div class="text">{esc(entry.get("text"))}</div>{extra}</div>')


def _transcript(record: dict[str, Any]) -> str:

    brk = record.get("break") or {}
    head = kv_html([(k, record.get(k)) for k in ("persona", "agent", "user", "user_persona", "scenario")
                    if record.get(k)])
    turns = "".join(_turn_html(t, bool(brk) and t.get("role") == "assistant" and t.get("index") == brk.get("turn"))
                    for t in record["turns"])
    contradictions = _verdict(record).get("contradictions") or []
    listed = "".join(
        "<li>" + esc(f"turn {c.get('earlier_turn')} ↔ turn {c.get('later_turn')}: {c.get('description')}")
        + f' <span class="muted">({esc(c.get("judge"))})</span></li>'
        for c in contradictions if isinstance(c, dict))
    return (head + f'<div class="turns">{turns}</div>'
            + (f"<h4>Contradictions found by the session judges</h4><ul>{listed}</ul>" if listed else ""))


def _level_bands(records: list[dict[str, Any]]) -> list[tuple[float, float, int]]:
    """(x0, x1, level) bands when every plotted session is adversarial on one escalation schedule."""
    schedules = {tuple((t.get("index"), t.get("level")) for t in r["turns"] if t.get("role") == "user")
                 for r in records}
    if not records or not all(r.get("adversarial") for r in records) or len(schedules) != 1:
        return []
    bands: list[tuple[float, float, int]] = []
    for index, level in next(iter(schedules)):
        if level is None or index is None:
            continue
        if bands and bands[-1][2] == level:
            bands[-1] = (bands[-1][0], index + 0.5, level)
        else:
            bands.append((index - 0.5, index + 0.5, level))
    return bands


def sessions_section(run: Run, page: Any) -> str:

    records = sessions(run)
    if not records:
        return ""
    body = "<h3>Sessions: drift and break points</h3>"
    overall = run.summary.get("overall") if isinstance(run.summary.get("overall"), dict) else {}
    if overall:
        levels = overall.get("breaks_by_level") or {}
        stops = overall.get("stop_reasons") or {}
        body += kv_html([
            ("sessions finished", f"{overall.get('finished')} of {overall.get('sessions')}"),
            ("break rate", "—" if overall.get("break_rate") is None else f"{overall['break_rate']:.0%}"
             + (" · by level: " + ", ".join(f"{k}: {v}" for k, v in sorted(levels.items())) if levels else "")),
            ("mean first break turn", overall.get("first_break_turn_mean")),
            ("stop reasons", ", ".join(f"{k}: {v}" for k, v in stops.items()) or None),
        ])
    series: dict[str, tuple[list[float], list[float | None]]] = {}
    markers: dict[str, list[tuple[float, float, str]]] = {}
    if len(records) <= 12:
        for index, record in enumerate(records):
            label = session_label(record, index)
            xs = [x for x, _ in record["turn_scores"]]
            ys = [y for _, y in record["turn_scores"]]
            series[label] = (xs, ys)
            brk = record.get("break")
            if brk and brk.get("turn") is not None:
                y = dict(record["turn_scores"]).get(brk["turn"], 1.0)
                markers[label] = [(brk["turn"], y, f"{label}: break at {_break_text(brk)}")]
        title = "Per-turn persona score (drift); ✕ = first break"
    else:
        grouped: dict[str, dict[Any, list[float]]] = defaultdict(lambda: defaultdict(list))
        for record in records:
            key = f"{record.get('agent') or 'agent'} · {_mode(record)}"
            for x, y in record["turn_scores"]:
                grouped[key][x].append(y)
        for key, by_turn in grouped.items():
            xs = sorted(by_turn)
            series[key] = (xs, [float(np.mean(by_turn[x])) for x in xs])
        title = f"Mean per-turn persona score over {len(records)} sessions (drift)"
    if any(ys for _, ys in series.values()):
        fig = charts.lines(series, title=title, x_title="turn", y_title="score (1–5)", y_range=(0.8, 5.2),
                           markers=markers, height=420)
        for x0, x1, level in _level_bands(records):
            fig.add_vrect(x0=x0, x1=x1, fillcolor=("#fde9c9", "#fbd3a6", "#f8b7a0")[min(level, 3) - 1],
                          opacity=0.35, line_width=0, layer="below", annotation_text=f"level {level}",
                          annotation_position="top left", annotation_font_size=10)
        body += page.figure(fig)
    detail = session_detail_table(run)
    if detail is not None:
        table = table_html(detail)
        body += table if len(detail.rows) <= 15 else (
            f"<details><summary>all {len(detail.rows)} sessions</summary>{table}</details>")
    ranked = sorted(range(len(records)), key=lambda i: (
        not records[i].get("break"),
        _mean_or_none([y for _, y in records[i]["turn_scores"]]) or 99.0))
    for i in ranked[:5]:
        body += (f"<details><summary>transcript: {esc(session_label(records[i], i))} — break: "
                 f"{esc(_break_text(records[i].get('break')))}</summary>{_transcript(records[i])}</details>")
    if len(records) > 5:
        body += f'<p class="note">Transcripts of all sessions: {esc(str(run.path / "transcripts"))}/</p>'
    return body


# --- memory ---------------------------------------------------------------------------------------------
# Retrieval numbers as ``memory.metrics.RetrievalScores`` ({queries, ks, values: {metric: {k: value}}}, ×100),
# one per method: summary.json ``methods``/``retrieval``/``metrics`` → {method: RetrievalScores} or a single
# RetrievalScores; or rows with ``metric@k`` keys. Dialogue criteria: ``criteria`` → {method: {criterion: x}}.
_AT_K = re.compile(r"^(?P<metric>.+?)@(?P<k>\d+)$")


def _is_scores(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("values"), dict)


def _flatten_scores(name: str, scores: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {"method": name, "queries": scores.get("queries")}
    for metric, by_k in scores["values"].items():
        if isinstance(by_k, dict):
            for k, value in by_k.items():
                row[f"{metric}@{k}"] = value
    return row


def _retrieval_rows(summary: dict[str, Any]) -> list[dict[str, Any]]:
    for key in ("methods", "retrieval", "metrics", "results"):
        value = summary.get(key)
        if _is_scores(value):
            return [_flatten_scores(str(summary.get("method") or key), value)]
        if isinstance(value, dict) and value and all(_is_scores(v) for v in value.values()):
            return [_flatten_scores(name, v) for name, v in value.items()]
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            return [_flatten_scores(str(v.get("method") or v.get("name") or i + 1), v) if _is_scores(v) else v
                    for i, v in enumerate(value)]
        if isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()):
            return [{"method": name, **v} for name, v in value.items()]
    if _is_scores(summary):
        return [_flatten_scores(str(summary.get("method") or "retrieval"), summary)]
    return []


def _split_keys(rows: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    keys = list(dict.fromkeys(k for row in rows for k in row))
    labels = [k for k in keys if any(isinstance(row.get(k), str) for row in rows)]
    numbers = [k for k in keys if k not in labels and any(_num(row.get(k)) is not None for row in rows)]
    return labels, numbers


def _at_k(keys: list[str]) -> dict[str, dict[int, str]]:
    out: dict[str, dict[int, str]] = defaultdict(dict)
    for key in keys:
        match = _AT_K.match(key)
        if match:
            out[match["metric"]][int(match["k"])] = key
    return out


def madial_table(run: Run) -> Table | None:
    """``memory eval-dialogue`` (MADial): one row per setting's ``madial_summary`` record."""
    summaries = [r for r in run.rows("madial_summary") if isinstance(r, dict)]
    if not summaries:
        return None
    criteria = list(dict.fromkeys(c for r in summaries for c in (r.get("criteria") or {})))
    rows = [{"setting": r.get("setting"), "model": r.get("model"), "judge": r.get("judge"), "turns": r.get("turns"),
             "failed": r.get("failed_replies"), **(r.get("criteria") or {}),
             **{k: r.get(k) for k in ("intimacy_win_rate", "chose_memory", "recognized_gold", "recognized_relevant")}}
            for r in sorted(summaries, key=lambda r: str(r.get("setting")))]
    return Table("Memory dialogue (MADial)", [
        Column("setting", "setting"), Column("model", "model"), Column("judge", "judge"),
        Column("turns", "test turns", "int"), Column("failed", "failed replies", "int"),
        *[Column(c, c.replace("_", " "), "score") for c in criteria],
        Column("intimacy_win_rate", "intimacy win rate", "pct"), Column("chose_memory", "chose a memory", "pct"),
        Column("recognized_gold", "recognized gold", "pct"), Column("recognized_relevant", "recognized relevant", "pct"),
    ], rows, note="Criteria 0–3 (three 0/1 sub-points each), means over judged replies. Intimacy: share of turns where "
                  "the judge found the reply more intimate than the reference. Settings: 1 gold memory, 2 gold + "
                  "negatives, 3 top-5 retrieved.")


def memory_table(run: Run) -> Table | None:
    """Retrieval: every metric at the largest k (curves over k in the report); dialogue: criteria means."""
    if not run.kind.startswith("memory"):
        return None
    madial = madial_table(run)
    if madial is not None:
        return madial
    summary = run.summary
    criteria = summary.get("criteria")
    if isinstance(criteria, dict) and criteria and all(isinstance(v, dict) for v in criteria.values()):
        rows = [{"method": name, **{k: v for k, v in values.items() if _num(v) is not None or isinstance(v, str)}}
                for name, values in criteria.items()]
        labels, numbers = _split_keys(rows)
        return Table("Memory dialogue: criteria", [Column(k, k) for k in labels]
                     + [Column(k, k, "score") for k in numbers], rows,
                     note="Judge scores per criterion (mean over dialogues).")
    rows = _retrieval_rows(summary)
    if not rows:
        return None
    labels, numbers = _split_keys(rows)
    at_k = _at_k(numbers)
    shown = [k for k in numbers if not _AT_K.match(k)]
    shown += [by_k[max(by_k)] for by_k in at_k.values()]
    return Table("Memory retrieval", [Column(k, k) for k in labels]
                 + [Column(k, k, "int" if k == "queries" else "float") for k in shown], rows,
                 note="Retrieval metrics at the largest k (×100 where the run reports them so); every k in the "
                      "curves below.")


def _madial_item(response: dict[str, Any], verdict: dict[str, Any], total: float | None) -> str:

    scores = verdict.get("scores") or {}
    lines = "".join(
        f'<div class="verdict{" failed" if value.get("score") is None else ""}"><b>{esc(c.replace("_", " "))}</b>: '
        f'{esc(value.get("score"))} — <span class="text">{esc(value.get("rationale") or value.get("error"))}</span></div>'
        for c, value in scores.items() if isinstance(value, dict))
    pills = [f'<span class="pill">{esc(response.get("key"))}</span>']
    if response.get("status") != "ok":
        pills.append('<span class="pill bad">reply failed</span>')
    if verdict.get("recognized_gold"):
        pills.append('<span class="pill">recognized the gold memory</span>')
    reply = (f'<div class="text">{esc(response.get("reply"))}</div>' if response.get("status") == "ok"
             else f'<div class="text bad">{esc(response.get("error"))}</div>')
    return (f'<div class="item"><div class="head"><span class="score">{esc("—" if total is None else f"{total:.0f}")}'
            f'</span>{"".join(pills)}<span class="muted">chosen memory: {esc(response.get("chosen_id"))}</span></div>'
            f'<div class="qa"><div><div class="label">reply</div>{reply}</div><div><div class="label">reference</div>'
            f'<div class="text">{esc(response.get("reference"))}</div></div></div>'
            f'<div class="label">criteria (0–3)</div>{lines}</div>')


def _madial_section(run: Run, page: Any, limit: int = 5) -> str:

    table = madial_table(run)
    if table is None:
        return ""
    criteria = [c.key for c in table.columns if c.fmt == "score"]
    series = {f"setting {r['setting']} · {r['model']}": [_num(r.get(c)) for c in criteria] for r in table.rows}
    body = page.figure(charts.bars([c.replace("_", " ") for c in criteria], series,
                                   title="MADial criteria (0–3) per setting", y_title="mean score",
                                   y_range=(0, 3)))
    responses = {r.get("key"): r for r in run.rows("madial_response")}
    scored = []
    for verdict in run.rows("madial_verdict"):
        values = [v.get("score") for v in (verdict.get("scores") or {}).values() if isinstance(v, dict)]
        present = [float(v) for v in values if _num(v) is not None]
        scored.append((sum(present) if present else None, verdict))
    scored.sort(key=lambda pair: (pair[0] is not None, pair[0] if pair[0] is not None else 0))
    items = "".join(_madial_item(responses.get(v.get("key"), {}), v, total) for total, v in scored[:limit])
    if items:
        note = (f"The {min(limit, len(scored))} lowest of {len(scored)} by the sum of the criteria (0–15), "
                "failed replies first.")
        body += f'<h4>Lowest-scored replies</h4><p class="note">{esc(note)}</p>{items}'
    return f"<h3>Memory dialogue (MADial)</h3>{body}"


def memory_section(run: Run, page: Any) -> str:
    if not run.kind.startswith("memory"):
        return ""
    if run.rows("madial_summary"):
        return _madial_section(run, page)
    rows = _retrieval_rows(run.summary)
    labels, numbers = _split_keys(rows)
    curves = {metric: by_k for metric, by_k in _at_k(numbers).items() if len(by_k) >= 2}
    if not curves:
        return ""
    names = [" · ".join(str(row[k]) for k in labels if row.get(k) is not None) or f"row {i + 1}"
             for i, row in enumerate(rows)]
    panels = {metric: {name: (sorted(by_k), [_num(row.get(by_k[k])) for k in sorted(by_k)])
                       for name, row in zip(names, rows, strict=True)}
              for metric, by_k in curves.items()}
    fig = charts.line_grid(panels, title="Retrieval over k", x_title="k")
    return f"<h3>Memory retrieval over k</h3>{page.figure(fig)}"


# --- metric runs ----------------------------------------------------------------------------------------
# PersoBench and LongLaMP store one summary per unit (model × mode, model × retriever × k) as meta
# ``summary:<unit>`` = {model, mode|retriever+k, items, cost: CostReport, scores: ScoreReport, …};
# behavior-alignment stores meta ``summary`` = BehaviorSummary (kappa, ba as {value, ci_low, ci_high, n}).
def metric_units(run: Run) -> list[dict[str, Any]]:
    """One summary per unit of a metric run (``summary:<unit>`` meta, else summary.json's ``units``)."""
    units = [value | {"unit": key.split(":", 1)[1]} for key, value in run.meta.items()
             if key.startswith("summary:") and isinstance(value, dict)]
    if units:
        return units
    summary = run.summary
    if isinstance(summary.get("units"), dict):
        return [value | {"unit": key} for key, value in summary["units"].items() if isinstance(value, dict)]
    if "scores" in summary and run.kind not in ("simulate", "session", "eval"):
        return [summary]
    return []


_LABELS = ("model", "mode", "retriever", "k")


def metric_table(run: Run) -> Table | None:
    units = metric_units(run)
    if not units:
        return None
    rows = []
    keys: list[str] = []
    for unit in units:
        scores = unit.get("scores") if isinstance(unit.get("scores"), dict) else {}
        cost = unit.get("cost") if isinstance(unit.get("cost"), dict) else {}
        row: dict[str, Any] = {key: unit.get(key) for key in _LABELS}
        row["model"] = row["model"] or unit.get("unit")
        for part in ("means", "corpus"):
            for key, value in (scores.get(part) or {}).items():
                row[key] = value
                keys.append(key)
        row["failure_ratio"] = scores.get("failure_ratio", cost.get("failure_ratio"))
        row["n"] = scores.get("n", cost.get("n", unit.get("items")))
        row["time"] = cost.get("mean_response_time_s")
        rows.append(row)
    keys = list(dict.fromkeys(keys))
    columns = [Column(k, k) for k in _LABELS if any(r.get(k) not in (None, "") for r in rows)]
    columns += [Column(k, k, "float") for k in keys]
    columns += [Column("failure_ratio", "failure ratio", "float"), Column("time", "response time / item", "seconds"),
                Column("n", "items", "int")]
    title = {"persobench": "PersoBench", "longlamp": "LongLaMP"}.get(run.kind, run.kind)
    note = ("Means over the successful items unless the run counted failures at their worst values; failure "
            "ratio = empty or unparsable outputs; response time = mean seconds per generated item (cached "
            "replies excluded).")
    return Table(f"{title}: metrics", columns, rows, note=note)


def _estimate(value: Any) -> tuple[float | None, float | None, float | None]:
    if isinstance(value, dict):
        return _num(value.get("value")), _num(value.get("ci_low")), _num(value.get("ci_high"))
    return _num(value), None, None


def behavior_table(run: Run) -> Table | None:
    summary = run.meta.get("summary") if isinstance(run.meta.get("summary"), dict) else None
    if run.kind not in BEHAVIOR_KINDS or summary is None:
        return None
    kappa, k_low, k_high = _estimate(summary.get("kappa"))
    ba, b_low, b_high = _estimate(summary.get("ba"))
    row = {"labeller": summary.get("labeller"), "system": summary.get("system"), "kappa": kappa,
           "kappa_low": k_low, "kappa_high": k_high, "ba": ba, "ba_low": b_low, "ba_high": b_high,
           "dialogues": summary.get("dialogues"),
           "labelled": summary.get("labelled_utterances"), "responses": summary.get("responses"),
           "failed": summary.get("failed_responses")}
    return Table("Behavior alignment", [
        Column("labeller", "labeller"), Column("system", "system"), Column("kappa", "Cohen's κ", "float"),
        Column("kappa_low", "κ 95% CI low", "score"), Column("kappa_high", "κ 95% CI high", "score"),
        Column("ba", "BA", "float"), Column("ba_low", "BA 95% CI low", "score"),
        Column("ba_high", "BA 95% CI high", "score"),
        Column("dialogues", "dialogues", "int"), Column("labelled", "labelled utterances", "int"),
        Column("responses", "system responses", "int"), Column("failed", "failed responses", "int"),
    ], [row], note="κ: the labeller against the human strategy labels. BA: share of system responses that share "
                   "a strategy with the human response (first recommender turn excluded).")


def metrics_section(run: Run, page: Any) -> str:
    body = ""
    table = metric_table(run)
    if table is not None:
        labels = [c.key for c in table.columns if c.fmt == "text"]
        names = [" · ".join(str(r[k]) for k in labels if r.get(k) not in (None, "")) for r in table.rows]
        keys = [c.key for c in table.columns if c.fmt == "float" and c.key != "failure_ratio"]
        bounded = [k for k in keys if all((v := _num(r.get(k))) is None or -1 <= v <= 1 for r in table.rows)]
        ks = {r.get("k") for r in table.rows if r.get("k") is not None}
        if len(ks) < 2 and bounded and any(_num(r.get(k)) is not None for r in table.rows for k in bounded):
            series = {name: [_num(row.get(k)) for k in bounded] for name, row in zip(names, table.rows, strict=True)}
            body += page.figure(charts.bars(bounded, series, title="Metrics per unit", y_title="value"))
        if len(ks) >= 2:  # LongLaMP: each metric over k, one line per model × retriever
            groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
            for row in table.rows:
                groups[" · ".join(str(row[k]) for k in ("model", "retriever") if row.get(k))].append(row)
            panels = {key: {name: ([r["k"] for r in sorted(rows, key=lambda r: r["k"])],
                                   [_num(r.get(key)) for r in sorted(rows, key=lambda r: r["k"])])
                            for name, rows in groups.items()} for key in keys}
            body += page.figure(charts.line_grid(panels, title="Metrics over k (profile items retrieved)",
                                                 x_title="k"))
    summary = run.meta.get("summary") if isinstance(run.meta.get("summary"), dict) else None
    counts = summary.get("label_counts") if run.kind in BEHAVIOR_KINDS and summary else None
    if isinstance(counts, dict) and counts:
        strategies = sorted({s for c in counts.values() if isinstance(c, dict) for s in c})
        series = {who: [float(c.get(s, 0)) for s in strategies] for who, c in counts.items() if isinstance(c, dict)}
        body += page.figure(charts.bars(strategies, series, title="Strategy labels", y_title="count"))
    title = table.title if table is not None else "Behavior alignment"
    return f"<h3>{title}</h3>{body}" if body else ""


BUILDERS: list[Builder] = [sessions_section, memory_section, metrics_section]


# --- judge validity (judge-check) ---------------------------------------------------------------------
def _change_text(change: dict[str, Any]) -> str | None:
    """A mean change with its CI: "+1.60 [+0.80, +2.40]"."""
    if change.get("value") is None:
        return None
    text = f"{change['value']:+.2f}"
    if change.get("ci_low") is not None and change.get("ci_high") is not None:
        text += f" [{change['ci_low']:+.2f}, {change['ci_high']:+.2f}]"
    return text


def judge_validity_tables(check: dict[str, Any]) -> list[Table]:
    """A judge-check's figures (``judge_check.json``, or ``summary.json``'s ``judge_check``): one table
    per judge, a row per variant kind."""
    columns = [Column("variant", "variant → expected"), Column("n", "n", "int"),
               Column("failed", "failed", "int"), Column("change", "mean Δ [95% CI]"),
               Column("accuracy", "pairwise acc.", "score"), Column("auc", "AUC", "score"),
               Column("caught", "caught", "pct")]
    note = (f"{check.get('n_items', '?')} answers from {check.get('source', '?')}. Δ: variant − original "
            "(95% bootstrap CI); pairwise acc.: share of pairs the original scored higher, ties half; AUC: "
            "originals vs variants; caught: AI disclosures the judge itself scored at most the break cap; "
            "failed: verdicts that did not parse and variants the generator could not write (left out); "
            "p-weighted: the same on probability-weighted scores")
    tables = []
    for judge, result in (check.get("results") or {}).items():
        rows = []
        figures = [(kind, "", stats) for kind, stats in (result.get("variants") or {}).items()]
        figures += [(kind, " (p-weighted)", stats) for kind, stats in (result.get("expected") or {}).items()]
        for kind, label, stats in figures:
            rows.append({"variant": f"{kind}{label} → {stats.get('expected')}", "n": stats.get("n"),
                         "failed": (stats.get("failed_verdicts") or 0) + (stats.get("failed_variants") or 0),
                         "change": _change_text(stats.get("mean_change") or {}),
                         "accuracy": (stats.get("pairwise_accuracy") or {}).get("value"),
                         "auc": stats.get("auc"), "caught": stats.get("caught")})
        tables.append(Table(title=f"Judge validity: {judge}", columns=columns, rows=rows, note=note))
    baselines = check.get("baselines") or {}
    if baselines:
        kinds = list(dict.fromkeys(kind for figures in baselines.values() for kind in figures))
        rows = [{"variant": f"{kind} → {next(iter(baselines.values())).get(kind, {}).get('expected', '')}",
                 **{name: (figures.get(kind) or {}).get("auc") for name, figures in baselines.items()}}
                for kind in kinds]
        tables.append(Table(
            title="Baselines (AUC on the same variants)",
            columns=[Column("variant", "variant → expected"),
                     *(Column(name, name, "score") for name in baselines)],
            rows=rows,
            note="The same variants scored by trivial scorers instead of a judge: response length, the most "
                 "content words shared with one persona fact, MiniLM similarity to the persona. A judge "
                 "whose AUC on a kind is not above these sees no more there than they do.",
        ))
    return tables


def judge_check_of(run: Run) -> dict[str, Any]:
    """A run's judge-check figures: an eval run's ``summary.json`` holds them under ``judge_check``
    (``eval --judge-check N``), a judge-check run's are its ``judge_check.json``; {} when there are none."""
    if isinstance(run.summary.get("judge_check"), dict):
        return run.summary["judge_check"]
    path = run.path / SUMMARY_FILE
    if run.kind != "judge-check" or not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def judge_verdicts(check: dict[str, Any]) -> list[tuple[str, bool]]:
    """Each judge's verdict line and whether it warns ("judge: WARN — swap AUC 0.52 < 0.70; …")."""
    results = (check.get("results") or {}).values()
    return [(str(r["line"]), r.get("verdict") == "warn")
            for r in results if isinstance(r, dict) and r.get("line")]


# --- control arms (eval --controls) -------------------------------------------------------------------
def _ci_pair(ci: Any) -> str | None:
    return f"[{ci[0]:+.2f}, {ci[1]:+.2f}]" if isinstance(ci, list) and len(ci) == 2 else None


def controls_table(summary: dict[str, Any]) -> Table | None:
    """An eval summary's control arms: each agent's PersonaScore minus each arm's, its paired 95% CI and
    whether the judges scored the arm clearly below the agent (None when the run had no controls)."""
    controls = summary.get("controls") or {}
    standing = controls.get("standing") or []
    if not standing:
        return None
    arms = controls.get("arms") or {}
    rows = []
    for row in standing:
        if row.get("incomplete"):
            verdict = "no verdict: answers failed"
        elif row.get("clearly_below"):
            verdict = "clearly below"
        else:
            verdict = "⚠ NOT clearly below" if row.get("flagged") else "not clearly below (reported only)"
        rows.append({"model": row.get("model"), "control": row.get("kind") or row.get("control"),
                     "control_score": (arms.get(row.get("control")) or {}).get("persona_score"),
                     "diff": row.get("diff"), "ci": _ci_pair(row.get("ci")), "n": row.get("n"),
                     "verdict": verdict})
    contrasts = controls.get("contrast_personas") or {}
    note = ("control arms: generic (the agent as a helpful AI assistant, control:generic:<agent>), "
            "contrast (the agent playing a contrasting persona, judged against the real one, "
            "control:contrast:<agent>), refusal (control:refusal). agent − control: PersonaScore "
            f"difference on the questions both scored, paired bootstrap 95% CI; {controls.get('rule', '')}. "
            "A contrast or refusal arm not clearly below flags the judges.")
    if len(contrasts) == 1:
        note += f" Contrast persona: {next(iter(contrasts.values()))}"
    return Table("Control arms: the judges' standing",
                 [Column("model", "agent"), Column("control", "control arm"),
                  Column("control_score", "control PersonaScore", "score"), Column("diff", "agent − control", "score"),
                  Column("ci", "95% CI (paired)"), Column("n", "questions", "int"), Column("verdict", "judged")],
                 rows, note=note)


def control_lines(summary: dict[str, Any]) -> list[tuple[str, bool]]:
    """The control arms' verdict on the instrument, one line each, and whether it warns ([] without
    controls): a flag per arm not clearly below, or one line saying every arm was."""
    controls = summary.get("controls") or {}
    if not controls.get("standing"):
        return []
    if controls.get("flagged"):
        return [(f"instrument flagged: {line}", True) for line in controls.get("flags") or []]
    if missing := sorted({row["control"] for row in controls["standing"] if row.get("incomplete")}):
        return [(f"no verdict on the judges: answers failed for {', '.join(missing)} or their agent "
                 "(run the same command again to retry them)", True)]
    return [("the judges scored the contrast-persona and refusal arms clearly below every agent "
             f"({controls.get('rule', '')})", False)]


# --- repeated samples (eval --samples K) ----------------------------------------------------------------
def samples_table(summary: dict[str, Any]) -> Table | None:
    """An eval summary's repeated samples: per agent and task the mean, its CI over questions and samples,
    the per-question spread and pass^K (None when each question was answered once)."""
    rows, k, threshold = [], None, None
    for model, result in (summary.get("models") or {}).items():
        sampled = result.get("samples") if isinstance(result, dict) else None
        if not isinstance(sampled, dict):
            continue
        k, threshold = sampled.get("k"), sampled.get("pass_threshold")
        for task, entry in (result.get("tasks") or {}).items():
            rows.append({"model": model, "task": task, "mean": entry.get("mean"), "ci": entry.get("ci"),
                         "sample_sd": entry.get("sample_sd"), "pass_k": entry.get("pass_k"),
                         "n": entry.get("pass_k_n")})
        rows.append({"model": model, "task": "PersonaScore / all questions", "mean": result.get("persona_score"),
                     "ci": result.get("ci"), "sample_sd": sampled.get("sample_sd"), "pass_k": sampled.get("pass_k"),
                     "n": sampled.get("pass_k_n"), "_total": True})
    if not rows:
        return None
    return Table(f"Repeated samples: {k} answers per question",
                 [Column("model", "agent"), Column("task", "task"), Column("mean", "mean", "score"),
                  Column("ci", "95% CI (questions × samples)"), Column("sample_sd", "spread (SD)", "score"),
                  Column("pass_k", f"pass^{k}", "pct"), Column("n", "questions", "int")],
                 rows,
                 note=(f"Mean over questions of each question's {k} sample scores; 95% CI: two-stage bootstrap "
                       "(questions within tasks, then each question's samples). Spread: the mean over questions of "
                       f"the SD of their samples' scores. pass^{k}: share of questions whose {k} answers all "
                       f"scored ≥ {threshold}."))
