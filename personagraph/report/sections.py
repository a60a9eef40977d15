"""Report sections for the non-eval run kinds: sessions, memory, metric runs.

Each builder takes a loaded run and the page and returns HTML, or "" when the run has none of its data.
Record shapes are read defensively (``.get``): a run written by an older or newer version renders what it
can rather than failing the whole report.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import numpy as np

from personagraph.report import charts
from personagraph.report.load import Run
from personagraph.report.tables import Column, Table

Builder = Callable[[Run, Any], str]


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return float(value) if np.isfinite(value) else None
    return None


# --- sessions -------------------------------------------------------------------------------------------
def sessions(run: Run) -> list[dict[str, Any]]:
    """Session records (``kind="session"``), each with ``turn_scores`` [(index, mean score or None)] added."""
    out = []
    for record in run.rows("session"):
        turns = record.get("turns") or []
        points = []
        for turn in turns:
            if not isinstance(turn, dict) or not turn.get("scores"):
                continue
            values = [
                float(score)
                for by_task in turn["scores"].values() if isinstance(by_task, dict)
                for score in by_task.values() if _num(score) is not None
            ] + [float(v) for v in turn["scores"].values() if _num(v) is not None]
            points.append((turn.get("index"), float(np.mean(values)) if values else None))
        out.append({**record, "turn_scores": points})
    return out


def session_label(record: dict[str, Any], index: int) -> str:
    persona = record.get("persona")
    if isinstance(persona, dict):
        persona = persona.get("description")
    parts = [str(persona or f"session {index + 1}")[:40]]
    if record.get("model"):
        parts.append(str(record["model"]))
    if record.get("mode"):
        parts.append(str(record["mode"]))
    return " · ".join(parts)


def session_table(run: Run) -> Table | None:
    records = sessions(run)
    if not records:
        return None
    rows = []
    for index, record in enumerate(records):
        brk = record.get("break") or {}
        scores = [s for _, s in record["turn_scores"] if s is not None]
        verdict = record.get("session_verdict")
        if isinstance(verdict, dict):
            verdict = verdict.get("score", verdict.get("verdict"))
        rows.append({
            "session": session_label(record, index),
            "turns": len(record.get("turns") or []),
            "mean": float(np.mean(scores)) if scores else None,
            "first": scores[0] if scores else None,
            "last": scores[-1] if scores else None,
            "drift_slope": _num(record.get("drift_slope")),
            "break": f"turn {brk.get('turn')} (level {brk.get('level')})" if brk else "none",
            "stop_reason": record.get("stop_reason"),
            "verdict": verdict,
        })
    return Table("Sessions", [
        Column("session", "session"), Column("turns", "turns", "int"), Column("mean", "mean turn score", "score"),
        Column("first", "first", "score"), Column("last", "last", "score"),
        Column("drift_slope", "drift slope / turn", "float"), Column("break", "break"),
        Column("stop_reason", "stop reason"), Column("verdict", "session verdict"),
    ], rows, note="Turn score = mean over judges and criteria of the agent turn. Drift slope: least-squares "
                  "slope of the turn scores per turn (negative = the persona fades). A break is the first turn "
                  "where the agent dropped the persona (adversarial sessions: at which pressure level).")


def _transcript(record: dict[str, Any]) -> str:
    from personagraph.report.html import esc

    brk = record.get("break") or {}
    parts = []
    for turn in record.get("turns") or []:
        if not isinstance(turn, dict):
            continue
        broke = brk and turn.get("index") == brk.get("turn") and turn.get("role") not in ("user",)
        meta = []
        if turn.get("level") is not None:
            meta.append(f"level {turn['level']}")
        if turn.get("status") not in (None, "ok"):
            meta.append(str(turn["status"]))
        scores = turn.get("scores") or {}
        for judge, by_task in scores.items():
            if isinstance(by_task, dict):
                meta.append(f"{judge}: " + ", ".join(f"{k} {v}" for k, v in by_task.items()))
        parts.append(
            f'<div class="turn{" break" if broke else ""}"><div class="who">#{esc(turn.get("index"))} '
            f'{esc(turn.get("role"))}{" · " + esc(" · ".join(meta)) if meta else ""}'
            f'{" · BREAK" if broke else ""}</div><div class="text">{esc(turn.get("text"))}</div></div>'
        )
    return '<div class="turns">' + "".join(parts) + "</div>"


def sessions_section(run: Run, page: Any) -> str:
    from personagraph.report.html import esc

    table = session_table(run)
    if table is None:
        return ""
    records = sessions(run)
    body = "<h3>Sessions: drift and break points</h3>"
    series: dict[str, tuple[list[float], list[float | None]]] = {}
    markers: dict[str, list[tuple[float, float, str]]] = {}
    if len(records) <= 12:
        for index, record in enumerate(records):
            label = session_label(record, index)
            while label in series:
                label += "′"
            xs = [x for x, _ in record["turn_scores"]]
            ys = [y for _, y in record["turn_scores"]]
            series[label] = (xs, ys)
            brk = record.get("break")
            if brk and brk.get("turn") is not None:
                y = dict(record["turn_scores"]).get(brk["turn"])
                if y is None and ys:
                    y = min(v for v in ys if v is not None) if any(v is not None for v in ys) else 1
                markers[label] = [(brk["turn"], y if y is not None else 1,
                                   f"break at turn {brk['turn']} (level {brk.get('level')})")]
        title = "Per-turn persona score (drift); ✕ = break point"
    else:
        grouped: dict[str, dict[Any, list[float]]] = defaultdict(lambda: defaultdict(list))
        for record in records:
            key = str(record.get("model") or record.get("mode") or "all sessions")
            for x, y in record["turn_scores"]:
                if y is not None:
                    grouped[key][x].append(y)
        for key, by_turn in grouped.items():
            xs = sorted(by_turn)
            series[key] = (xs, [float(np.mean(by_turn[x])) for x in xs])
        title = f"Mean per-turn persona score over {len(records)} sessions (drift)"
    if any(any(y is not None for y in ys) for _, ys in series.values()):
        body += page.figure(charts.lines(series, title=title, x_title="turn", y_title="score", markers=markers))
    breaks = [r for r in records if r.get("break")]
    if breaks:
        levels: dict[str, int] = defaultdict(int)
        for record in breaks:
            levels[str(record["break"].get("level"))] += 1
        body += ('<p class="note">' + esc(f"{len(breaks)} of {len(records)} sessions broke; by level: "
                 + ", ".join(f"level {k}: {v}" for k, v in sorted(levels.items()))) + "</p>")
    # Transcripts: the broken or lowest sessions first, collapsed.
    ranked = sorted(range(len(records)), key=lambda i: (
        not records[i].get("break"), table.rows[i]["mean"] if table.rows[i]["mean"] is not None else 99))
    for i in ranked[:5]:
        body += (f"<details><summary>transcript: {esc(session_label(records[i], i))}</summary>"
                 f"{_transcript(records[i])}</details>")
    return body


# --- memory ---------------------------------------------------------------------------------------------
_AT_K = re.compile(r"^(?P<metric>.+?)@(?P<k>\d+)$")


def _metric_table_rows(value: Any) -> list[dict[str, Any]]:
    """Rows of a metrics table in any of the shapes a summary may hold: a list of dicts, or a mapping of
    name → {metric: number}, or one {metric: number} mapping."""
    if isinstance(value, list):
        return [row for row in value if isinstance(row, dict)]
    if isinstance(value, dict):
        if value and all(isinstance(v, dict) for v in value.values()):
            return [{"name": name, **v} for name, v in value.items()]
        if any(_num(v) is not None for v in value.values()):
            return [value]
    return []


def _memory_rows(run: Run) -> tuple[list[dict[str, Any]], list[str], list[str]]:
    if not run.kind.startswith("memory"):
        return [], [], []
    summary = run.summary
    source = summary.get("metrics") if "metrics" in summary else summary.get("retrieval", summary.get("table"))
    rows = _metric_table_rows(source)
    keys = list(dict.fromkeys(k for row in rows for k in row))
    label_keys = [k for k in keys if any(isinstance(row.get(k), str) for row in rows)]
    num_keys = [k for k in keys if k not in label_keys and any(_num(row.get(k)) is not None for row in rows)]
    return rows, label_keys, num_keys


def memory_table(run: Run) -> Table | None:
    rows, label_keys, num_keys = _memory_rows(run)
    if not rows:
        return None
    columns = [Column(k, k) for k in label_keys] + [Column(k, k, "float") for k in num_keys]
    title = "Memory retrieval" if run.kind == "memory-retrieval" else "Memory dialogue criteria"
    return Table(title, columns, rows)


def memory_section(run: Run, page: Any) -> str:
    rows, label_keys, num_keys = _memory_rows(run)
    at_k: dict[str, dict[int, str]] = defaultdict(dict)
    for key in num_keys:
        match = _AT_K.match(key)
        if match:
            at_k[match["metric"]][int(match["k"])] = key
    body = ""
    for metric, by_k in at_k.items():
        ks = sorted(by_k)
        if len(ks) < 2:
            continue
        series = {}
        for index, row in enumerate(rows):
            name = " · ".join(str(row[k]) for k in label_keys if row.get(k) is not None) or f"row {index + 1}"
            series[name] = (ks, [_num(row.get(by_k[k])) for k in ks])
        body += page.figure(charts.lines(series, title=f"{metric} over k", x_title="k", y_title=metric, height=340))
    return f"<h3>Memory retrieval over k</h3>{body}" if body else ""


# --- metric runs ----------------------------------------------------------------------------------------
def metric_units(run: Run) -> list[dict[str, Any]]:
    """Summaries of a metric run, one per unit (model × mode, …): PersoBench's ``summary:<unit>`` meta,
    else ``summary.json`` (a single summary or a mapping of unit → summary)."""
    units = [value | {"unit": key.split(":", 1)[1]} for key, value in run.meta.items()
             if key.startswith("summary:") and isinstance(value, dict)]
    if units:
        return units
    summary = run.summary
    if isinstance(summary.get("units"), dict):
        return [value | {"unit": key} for key, value in summary["units"].items() if isinstance(value, dict)]
    if "scores" in summary or "means" in summary:
        return [summary]
    return []


def metric_table(run: Run) -> Table | None:
    units = metric_units(run)
    if not units:
        return None
    rows = []
    keys: list[str] = []
    for unit in units:
        scores = unit.get("scores") if isinstance(unit.get("scores"), dict) else unit
        cost = unit.get("cost") if isinstance(unit.get("cost"), dict) else {}
        row: dict[str, Any] = {"model": unit.get("model") or unit.get("unit"), "mode": unit.get("mode")}
        for key, value in (scores.get("means") or {}).items():
            row[key] = value
            keys.append(key)
        for key, value in (scores.get("corpus") or {}).items():
            row[key] = value
            keys.append(key)
        row["failure_ratio"] = scores.get("failure_ratio", cost.get("failure_ratio"))
        row["n"] = scores.get("n", cost.get("n", unit.get("items")))
        row["time"] = cost.get("mean_response_time_s")
        rows.append(row)
    keys = list(dict.fromkeys(keys))
    columns = [Column("model", "model")]
    if any(r.get("mode") for r in rows):
        columns.append(Column("mode", "mode"))
    columns += [Column(k, k, "float") for k in keys]
    columns += [Column("failure_ratio", "failure ratio", "float"), Column("time", "response time / item", "seconds"),
                Column("n", "items", "int")]
    title = {"persobench": "PersoBench"}.get(run.kind, run.kind)
    note = ("Fluency (ROUGE, METEOR, BERTScore), diversity (Dist-1/2), personalization (C-Score, UE-Score, "
            "coverage): means over the successful items unless the run counted failures at worst values.")
    return Table(f"{title}: metrics per model", columns, rows, note=note)


def metrics_section(run: Run, page: Any) -> str:
    table = metric_table(run)
    if table is None:
        return ""
    body = ""
    models = [str(r["model"]) + (f" · {r['mode']}" if r.get("mode") else "") for r in table.rows]
    keys = [c.key for c in table.columns if c.fmt == "float" and c.key != "failure_ratio"]
    bounded = [k for k in keys if all((v := _num(r.get(k))) is None or -1 <= v <= 1 for r in table.rows)]
    if bounded and any(_num(r.get(k)) is not None for r in table.rows for k in bounded):
        series = {model: [_num(row.get(k)) for k in bounded] for model, row in zip(models, table.rows)}
        body += page.figure(charts.bars(bounded, series, title="Metrics per model", y_title="value"))
    return f"<h3>{table.title}</h3>{body}" if body else ""


BUILDERS: list[Builder] = [sessions_section, memory_section, metrics_section]
