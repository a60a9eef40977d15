"""``personagraph report``: one self-contained HTML file from one or more run directories.

Sections render when their data exists and are left out otherwise. The page has no external resource:
CSS is inlined, plotly.js is inlined once (only when there is a chart), and every string that came from a
run — model output above all — goes through :func:`html.escape` (charts escape their labels too).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from string import Template
from typing import Any

from personagraph.errors import PersonagraphError
from personagraph.files import check_output_file, write_atomic, write_output
from personagraph.redact import redact_text
from personagraph.report import charts
from personagraph.report.cost import cost_rows, price_table, total_cost
from personagraph.report.evaldata import items, judges_of, persona_scores, verdict_scores
from personagraph.report.headlines import headline_tables
from personagraph.report.load import Run, load_runs
from personagraph.report.markup import esc, kv_html, table_html
from personagraph.report.sections import (
    BUILDERS,
    control_lines,
    judge_check_of,
    judge_validity_tables,
    judge_verdicts,
)
from personagraph.report.tables import Column, Table, fmt
from personagraph.report.view import usage_table
from personagraph.schemas import TASK_NAMES
from personagraph.version import __version__


@dataclass
class Section:
    id: str
    title: str
    body: str


class Page:
    """Renders figures to ``<div>``s; the plotly library is inlined once in the page head, or, with
    ``plotly_src``, loaded from that file (a path relative to the page: one shared copy for many pages)."""

    def __init__(self, plotly_src: str | None = None) -> None:
        self.figures = 0
        self.plotly_src = plotly_src

    def figure(self, fig: Any) -> str:
        self.figures += 1
        div = fig.to_html(full_html=False, include_plotlyjs=False, div_id=f"chart-{self.figures}",
                          config={"displaylogo": False, "responsive": True})
        return f'<div class="chart">{div}</div>'

    def head_script(self) -> str:
        if not self.figures:
            return ""
        if self.plotly_src is not None:
            return f'<script type="text/javascript" src="{esc(self.plotly_src)}"></script>'
        from plotly.offline import get_plotlyjs  # only for a report with charts

        return f'<script type="text/javascript">{get_plotlyjs()}</script>'


def _template(name: str) -> str:
    return resources.files("personagraph.report").joinpath("templates", name).read_text(encoding="utf-8")


# --- generic HTML pieces -------------------------------------------------------------------------------
def _when(timestamp: float | None) -> str | None:
    if timestamp is None:
        return None
    return dt.datetime.fromtimestamp(timestamp, tz=dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def _ci_text(ci: Any) -> str:
    return f"{ci[0]:.2f}–{ci[1]:.2f}" if isinstance(ci, list | tuple) and len(ci) == 2 and None not in ci else "—"


# --- sections over all runs ----------------------------------------------------------------------------
def _overview(runs: list[Run], page: Page) -> Section | None:
    rows = []
    for run in runs:
        config = run.config
        models = config.get("models") or list(run.summary.get("models", {})) or config.get("model") or list(
            dict.fromkeys(v["model"] for k, v in run.meta.items()
                          if k.startswith("config:") and isinstance(v, dict) and v.get("model")))
        judges = config.get("judges") or config.get("judge")
        rows.append({
            "run": run.name, "kind": run.kind, "path": str(run.path),
            "models": ", ".join(map(str, models)) if isinstance(models, list) else models,
            "judges": ", ".join(map(str, judges)) if isinstance(judges, list) else judges,
            "records": sum(len(v) for v in run.records.values()),
            "started": _when(run.span[0]) if run.span else None,
            "finished": _when(run.span[1]) if run.span else None,
            "wall": run.summary.get("wall_time_s"),
        })
    table = Table("Runs", [Column("run", "run"), Column("kind", "kind"), Column("path", "directory"),
                           Column("models", "models"), Column("judges", "judges"), Column("records", "records", "int"),
                           Column("started", "first record"), Column("finished", "last record"),
                           Column("wall", "wall time (last invocation)", "seconds")], rows)
    return Section("runs", "Runs", table_html(table))


def _eval_headline_html(table: Table) -> str:
    """The eval headline, model × task, with each cell's CI and n under the mean; best per column bold."""
    several = any("run" == c.key for c in table.columns)
    best: dict[str, float] = {}
    for key in [*TASK_NAMES, "persona_score"]:
        values = [row[key] for row in table.rows if row.get(key) is not None]
        if len(table.rows) > 1 and values:
            best[key] = max(values)
    head = ("<th>run</th>" if several else "") + "<th>model</th>" + "".join(
        f'<th class="num">{esc(task)}</th>' for task in TASK_NAMES
    ) + ('<th class="num">PersonaScore</th><th class="num">95% CI</th><th class="num">refusal rate</th>'
         '<th class="num">flagged as grading itself</th>'
         '<th class="num">failed verdicts</th><th class="num">judge α</th><th class="num">answers</th>'
         '<th class="num">cut at token limit</th>')
    body = []
    for row in table.rows:
        cells = (f"<td>{esc(row['run'])}</td>" if several else "") + f"<td>{esc(row['model'])}</td>"
        for task in TASK_NAMES:
            stats = row["_tasks"].get(task)
            if not stats:
                cells += '<td class="num">—</td>'
                continue
            cls = "num best" if best.get(task) is not None and stats.get("mean") == best[task] else "num"
            cells += (f'<td class="{cls}">{esc(fmt(stats.get("mean"), "score"))}'
                      f'<span class="ci">{esc(_ci_text(stats.get("ci")))} · n={esc(stats.get("n"))}</span></td>')
        cls = "num best" if best.get("persona_score") is not None and row["persona_score"] == best["persona_score"] else "num"
        ci = [row["ci_low"], row["ci_high"]]
        cells += (f'<td class="{cls}">{esc(fmt(row["persona_score"], "score"))}</td>'
                  f'<td class="num">{esc(_ci_text(ci))}</td>'
                  f'<td class="num">{esc(fmt(row["refusal_rate"], "pct"))}</td>'
                  f'<td class="num{" bad" if row.get("manipulation_flags") else ""}">'
                  f'{esc(fmt(row.get("manipulation_flags"), "int"))}</td>'
                  f'<td class="num{" bad" if row["failed_verdicts"] else ""}">{esc(fmt(row["failed_verdicts"], "int"))}</td>'
                  f'<td class="num">{esc(fmt(row["judge_alpha"], "float"))}</td>'
                  f'<td class="num">{esc(fmt(row["answers"], "int"))}</td>'
                  f'<td class="num">{esc(fmt(row["answers_at_token_limit"], "int"))}</td>')
        body.append(f"<tr>{cells}</tr>")
    return (f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>'
            f'<p class="note">{esc(table.note)} Under each task score: its 95% CI and the number of scored items. '
            "Bold: best per column.</p>")


def _headline(runs: list[Run], page: Page) -> Section | None:
    tables = headline_tables(runs)
    parts = []
    for table in tables:
        if table.rows and "_tasks" in table.rows[0]:
            parts.append(f"<h3>{esc(table.title)}</h3>" + _eval_headline_html(table))
        else:
            parts.append(table_html(table, caption=True))
    extra = []
    for run in runs:
        if run.in_progress:
            extra.append(f'<p class="bad">⚠ {esc(run.in_progress)}</p>')
        outcome = _outcome_line(run) if run.is_eval else None
        if outcome:
            extra.append(f'<p class="bad">⚠ {esc(outcome)}</p>')
        for line, warn in judge_verdicts(judge_check_of(run)) if run.is_eval else []:
            extra.append(f'<p class="{"bad" if warn else "note"}">{"⚠ " if warn else ""}'
                         f"Judge validity of {esc(run.name)}: {esc(line)}</p>")
        for judge, line in (run.summary.get("judge_validity") or {}).items():
            measured = "not measured against people" not in line
            extra.append(f'<p class="{"note" if measured else "bad"}">Judge {esc(judge)} against people: '
                         f"{esc(line)}</p>")
        for line, warn in control_lines(run.summary) if run.is_eval else []:
            extra.append(f'<p class="{"bad" if warn else "note"}">{"⚠ " if warn else ""}'
                         f"Control arms of {esc(run.name)}: {esc(line)}</p>")
        agreement = run.summary.get("judge_agreement") if run.is_eval else None
        if agreement:
            alpha = agreement.get("krippendorff_alpha_ordinal")
            judges = agreement.get("judges") or []
            means = run.summary.get("per_judge_mean") or {}
            text = (f"Judges of {run.name}: " + ", ".join(f"{j} (mean {fmt(means.get(j), 'score')})" for j in judges)
                    + f" · Krippendorff's α (ordinal, all answers) = {fmt(alpha, 'float')}"
                    + (f" · {agreement['note']}" if agreement.get("note") else "")
                    + f" · failed verdicts {run.summary.get('failed_verdicts', 0)} of {run.summary.get('verdicts', 0)}")
            extra.append(f'<p class="note">{esc(text)}</p>')
    if not parts and not extra:
        return None
    # a run with failures but no scores still shows its outcome line: the failures are the headline
    return Section("headline", "Headline", "".join(parts) + "".join(extra))


def _outcome_line(run: Run) -> str | None:
    """Failed items, incomplete persona units and shortfalls of an eval run, beside its scores (None: none)."""
    failures = len(run.summary.get("failures") or [])
    incomplete = run.summary.get("incomplete") or 0
    short = len(run.summary.get("shortfalls") or [])
    if not (failures or incomplete or short):
        return None
    parts = [f"{failures} failed items"] * bool(failures) + [f"{incomplete} incomplete personas"] * bool(incomplete)
    parts += [f"{short} selections/question lists short of the requested count"] * bool(short)
    missing = [m for m, r in (run.summary.get("models") or {}).items() if isinstance(r, dict) and r.get("incomplete")]
    parts += [f"PersonaScore incomplete for {', '.join(missing)}"] * bool(missing)
    permanent = sum(bool(f.get("permanent")) for f in run.summary.get("failures") or [] if isinstance(f, dict))
    retry = ("re-running the same command retries them" if permanent < failures or incomplete
             else "re-running cannot change them")
    if permanent:
        retry += f"; {permanent} permanent: the model's stored reply is unusable, not retried"
    return f"Outcome of {run.name}: " + " · ".join(parts) + f" (listed below; {retry})"


def _model_label(run: Run, model: str, several: bool) -> str:
    return f"{run.name} · {model}" if several else model


def _radars(runs: list[Run], page: Page) -> Section | None:
    evals = [run for run in runs if run.is_eval]
    several = len(evals) > 1
    series: dict[str, dict[str, float | None]] = {}
    for run in evals:
        for model, result in run.summary.get("models", {}).items():
            series[_model_label(run, model, several)] = {
                task: result.get("tasks", {}).get(task, {}).get("mean") for task in TASK_NAMES
            }
    if not series:
        return None
    body = page.figure(charts.radar(series, TASK_NAMES, title="All models, task scores (1–5)"))
    body += page.figure(charts.radar_grid(series, TASK_NAMES, title="Per model"))
    body += '<p class="note">Each axis is one PersonaGym task; a missing task score leaves a gap.</p>'
    return Section("radar", "Task profile (radar)", body)


# --- sections of one run -------------------------------------------------------------------------------
def _distributions(run: Run, page: Page) -> str:
    scores = verdict_scores(run)
    if not scores:
        return ""
    judges = [j for j in judges_of(run) if any(s["judge"] == j for s in scores)] or sorted({s["judge"] for s in scores})
    tasks = [t for t in TASK_NAMES if any(s["task"] == t for s in scores)]
    body = page.figure(charts.score_distributions(scores, tasks, judges, title="Verdict scores per task and judge"))
    models = sorted({s["model"] for s in scores})
    if 1 < len(models) <= 4:
        for model in models:
            mine = [s for s in scores if s["model"] == model]
            body += page.figure(charts.score_distributions(mine, tasks, judges, title=f"Verdict scores: {model}"))
    note = ("Share of each score (1–5) per judge; bars of different heights at the same score show where the "
            "judges disagree.")
    return f"<h3>Score distributions</h3>{body}<p class=\"note\">{esc(note)}</p>"


def _sample_spread(run: Run, page: Page) -> str:
    """Repeated samples (``eval --samples K``): each question's spread of sample scores (the headline holds
    the table of spread and pass^K)."""
    questions = {model: result["samples"]["questions"] for model, result in (run.summary.get("models") or {}).items()
                 if isinstance(result, dict) and isinstance(result.get("samples"), dict)}
    if not questions:
        return ""
    figure = page.figure(charts.sample_spread(questions, title="Spread of each question's sample scores"))
    note = "A dot per sample; the bar spans the question's lowest to highest sample score around their mean."
    return f"<h3>Repeated samples</h3>{figure}<p class=\"note\">{esc(note)}</p>"


def _per_persona(run: Run, page: Page) -> str:
    try:
        scores = persona_scores(run)
    except ValueError:  # a config that does not parse: the headline says what the summary holds
        return ""
    models = list(run.summary.get("models", {}))
    if not scores or not models:
        return ""
    rows = [{"persona": persona, **by_model} for persona, by_model in scores.items()]
    kind = run.summary.get("score_kind", "integer")
    table = Table("PersonaScore per persona", [Column("persona", "persona")] + [Column(m, m, "score") for m in models],
                  rows, note=f"Each persona's PersonaScore, computed as the model's (scores: {kind}); few items "
                             "per persona: read as a hint.")
    return table_html(table, caption=True)


def _verdict_html(verdict: dict[str, Any]) -> str:
    if verdict.get("status") == "ok":
        capped = (f' <span class="muted">(judge said {esc(verdict["judge_score"])}; capped for the persona-break '
                  f'phrase “{esc(verdict.get("capped_by"))}”)</span>' if verdict.get("judge_score") is not None else "")
        return (f'<div class="verdict"><b>{esc(verdict.get("judge"))}</b>: {esc(verdict.get("score"))}{capped}'
                f' — <span class="text">{esc(verdict.get("rationale"))}</span></div>')
    return (f'<div class="verdict failed"><b>{esc(verdict.get("judge"))}</b>: <span class="bad">failed</span>'
            f' — {esc(verdict.get("error"))}<div class="text muted">{esc(verdict.get("raw"))}</div></div>')


def _item_html(item: dict[str, Any], samples: int) -> str:
    score = "—" if item["score"] is None else f"{item['score']:.2f}"
    pills = [f'<span class="pill">{esc(item["model"])}</span>', f'<span class="pill">{esc(item["task"])}</span>']
    if samples > 1:  # the samples of a question are otherwise identical cards
        pills.append(f'<span class="pill">sample {item.get("sample", 0) + 1}/{samples}</span>')
    if item.get("refusal"):
        pills.append('<span class="pill bad">refusal</span>')
    if item.get("status") != "ok":
        pills.append('<span class="pill bad">answer failed</span>')
    answer = (f'<div class="text">{esc(item["answer"])}</div>' if item.get("status") == "ok"
              else f'<div class="text bad">{esc(item.get("error"))}</div>')
    verdicts = "".join(_verdict_html(v) for v in item["verdicts"]) or '<div class="muted">no verdicts</div>'
    return (f'<div class="item"><div class="head"><span class="score">{score}</span>{"".join(pills)}'
            f'<span class="muted">{esc(item["persona"])}</span></div>'
            f'<div class="qa"><div><div class="label">question</div><div class="text">{esc(item["question"])}</div>'
            f'</div><div><div class="label">answer</div>{answer}</div></div>'
            f'<div class="label">verdicts</div>{verdicts}</div>')


def _lowest(run: Run, page: Page, limit: int) -> str:
    """Each model's ``limit`` lowest-scored items (a model's own worst answers, whatever the other models
    scored), then the answers without a score."""
    rows = items(run)
    models = list(dict.fromkeys([*run.summary.get("models", {}), *(i["model"] for i in rows)]))
    unscored = [i for i in rows if i["score"] is None]
    if not rows:
        return ""
    samples = run.config.get("samples", 1) if isinstance(run.config.get("samples"), int) else 1
    parts = []
    for model in models:
        scored = sorted((i for i in rows if i["model"] == model and i["score"] is not None),
                        key=lambda i: (i["score"], i["task"]))
        if scored:
            note = f"The {min(limit, len(scored))} lowest item scores of {len(scored)}, with every judge's rationale."
            parts.append(f'<h4>{esc(model)}</h4><p class="note">{esc(note)}</p>'
                         + "".join(_item_html(i, samples) for i in scored[:limit]))
    if unscored:
        parts.append(f"<details><summary>{len(unscored)} answer(s) without a score (every verdict failed, or a "
                     "non-answer left out)</summary>" + "".join(_item_html(i, samples) for i in unscored[:limit])
                     + "</details>")
    return "<h3>Lowest-scored items</h3>" + "".join(parts)


def _usage(run: Run, page: Page) -> str:
    rows = cost_rows(run.calls)
    summary = run.summary
    if not rows and not summary.get("roles"):
        return ""
    parts = ["<h3>Tokens, cost and time</h3>"]
    facts = []
    if summary.get("wall_time_s") is not None:
        facts.append(("wall time (last invocation)", fmt(summary["wall_time_s"], "seconds")))
    if summary.get("llm_calls") is not None:
        calls, hits = summary.get("llm_calls", 0), summary.get("cache_hits", 0)
        rate = hits / (calls + hits) if calls + hits else None
        facts.append(("LLM calls sent (last invocation)", fmt(calls, "int")))
        facts.append(("cache hits (last invocation)", f"{fmt(hits, 'int')} ({fmt(rate, 'pct')} of requests)"))
    if rows:
        total, unknown = total_cost(rows)
        facts.append(("cost of all stored calls", fmt(total, "usd") + (" + unknown" if unknown else "")))
    if facts:
        parts.append(kv_html(facts))
    table = usage_table(run)
    if table is not None:
        prices = price_table()
        table.title = "Calls stored in the run (every invocation)"
        table.note = (f"Cost from OpenAI list prices ({prices.get('as_of')}, {prices.get('currency')}); local and "
                      "test models cost 0; a model without a known price shows —. Model time sums call latencies "
                      "(calls run concurrently, so it exceeds wall time). A cached call is stored once and costs "
                      "nothing again.")
        parts.append(table_html(table))
    roles = summary.get("roles") or {}
    if roles:
        parts.append(table_html(Table(
            "Per role, last invocation",
            [Column("role", "role"), Column("calls", "calls sent", "int"), Column("cache_hits", "cache hits", "int"),
             Column("input_tokens", "input tokens", "int"), Column("output_tokens", "output tokens", "int"),
             Column("failures", "failures", "int")],
            [{"role": role, **values} for role, values in roles.items() if isinstance(values, dict)],
        ), caption=True))
    return "".join(parts)


def _errors(run: Run, page: Page) -> str:
    failures = [f for f in run.summary.get("failures") or [] if isinstance(f, dict)]
    if not failures:
        return ""
    body = "".join(f"<tr><td>{esc(f.get('stage'))}</td><td>{esc(f.get('item'))}</td><td>{esc(f.get('model'))}</td>"
                   f"<td class=\"text\">{esc(f.get('reason'))}</td>"
                   f"<td>{'no (permanent)' if f.get('permanent') else 'yes'}</td></tr>" for f in failures)
    return (f"<details><summary>{len(failures)} failed item(s)</summary><div class=\"scroll\"><table><thead><tr>"
            f"<th>stage</th><th>item</th><th>model</th><th>reason</th><th>retried on re-run</th></tr></thead>"
            f"<tbody>{body}</tbody></table></div></details>")


def _config(run: Run, page: Page) -> str:
    meta = dict(run.meta)
    config = meta.pop("config", None)
    versions = meta.pop("versions", None)
    prompts = meta.pop("prompts", None)
    kind = meta.pop("kind", run.kind)
    pairs: list[tuple[str, Any]] = [("kind", kind), ("directory", str(run.path))]
    if isinstance(config, dict):
        for key in ("models", "judges", "generator", "model", "judge", "user", "seed"):
            if key in config:
                value = config[key]
                if key == "generator" and not value and run.is_eval and config.get("judges"):
                    value = f"{config['judges'][0]} (the first judge)"  # what runs/eval.py uses then
                pairs.append((key, ", ".join(map(str, value)) if isinstance(value, list) else value))
    if isinstance(versions, dict):
        pairs += [(f"version: {k}", v) for k, v in versions.items()]
    if isinstance(prompts, dict):
        pairs += [(f"prompt/data hash: {k}", v) for k, v in prompts.items()]
    pairs += [(f"prompt/data hash: {k.split(':', 1)[-1]}", v) for k, v in meta.items()
              if (k.startswith("prompt") or k in ("strategies",)) and isinstance(v, str)]
    for key, value in meta.items():
        if key.startswith("config:") and isinstance(value, dict):
            pairs.append((f"unit {key.split(':', 1)[1]}", ", ".join(
                f"{k}={v}" for k, v in value.items() if isinstance(v, str | int | float) and k != "data")))
    body = "<h3>Run configuration</h3>" + kv_html(pairs)
    rest = {"config": config, **meta} if config is not None else meta
    body += ("<details><summary>full configuration (secrets are never stored; any key naming one is redacted)"
             f"</summary><pre>{esc(json.dumps(rest, indent=2, ensure_ascii=False, default=str))}</pre></details>")
    return body


def _judge_validity(run: Run) -> str:
    """The "Judge validity" section: each judge's verdict line and figures per variant kind."""
    check = judge_check_of(run)
    tables = judge_validity_tables(check)
    if not tables:
        return ""
    lines = "".join(f'<p class="{"bad" if warn else "note"}">{esc(line)}</p>'
                    for line, warn in judge_verdicts(check))
    return "<h3>Judge validity</h3>" + lines + "".join(table_html(table, caption=True) for table in tables)


_SCRIPT_SLOT = f"<!--plotly-js-{uuid.uuid4().hex}-->"
RunSection = Callable[[Run, Page], str]


def run_sections(run: Run, page: Page, *, lowest: int = 10) -> list[str]:
    """The HTML parts of one run, in page order; parts without data are empty and left out."""
    parts: list[str] = []
    if run.is_eval:
        parts += [_distributions(run, page), _sample_spread(run, page), _per_persona(run, page),
                  _lowest(run, page, lowest)]
    parts += [builder(run, page) for builder in BUILDERS]
    parts += [_judge_validity(run)]
    parts += [_usage(run, page), _errors(run, page), _config(run, page)]
    return [part for part in parts if part]


def build_report(runs: list[Run], *, title: str | None = None, lowest: int = 10,
                 plotly_src: str | None = None) -> str:
    """The report page for loaded runs (see :func:`write_report`; ``plotly_src``: see :class:`Page`)."""
    if not runs:
        raise PersonagraphError("report: give at least one run directory")
    page = Page(plotly_src)
    sections = [s for s in (_overview(runs, page), _headline(runs, page), _radars(runs, page)) if s]
    for run in runs:
        parts = run_sections(run, page, lowest=lowest)
        if parts:
            heading = f"{run.name} ({run.kind})" if len(runs) > 1 else f"Details ({run.kind})"
            sections.append(Section(f"run-{len(sections)}", heading, "".join(parts)))
    body = "".join(f'<section id="{s.id}"><h2>{esc(s.title)}</h2>{s.body}</section>' for s in sections)
    nav = "".join(f'<a href="#{s.id}">{esc(s.title)}</a>' for s in sections)
    title = title or ("personagraph report — " + ", ".join(run.name for run in runs))
    kinds = sorted({run.kind for run in runs})
    subtitle = f"{len(runs)} run{'s' if len(runs) > 1 else ''} · {', '.join(kinds)}"
    page_html = Template(_template("page.html")).substitute(
        title=esc(title), subtitle=esc(subtitle), nav=nav, body=body, css=_template("report.css"),
        version=esc(__version__), generated=esc(_when(dt.datetime.now(tz=dt.UTC).timestamp())),
        plotlyjs=_SCRIPT_SLOT,
    )
    page_html = redact_text(page_html)  # plotly.js goes in after: it is library code, not run data
    return page_html.replace(_SCRIPT_SLOT, page.head_script(), 1)


def write_report(run_dirs: list[str | Path], out: str | Path, *, title: str | None = None, lowest: int = 10,
                 assets: Path | None = None) -> Path:
    """Writes the report of these run directories to ``out``: one self-contained HTML file, or, with
    ``assets`` (a directory), a page that loads the plotting library from one copy kept there (many
    reports, as the pytest plugin writes them, then weigh kilobytes instead of megabytes each).

    Raises:
        PersonagraphError: a path that is not a run directory, an unreadable store, an unwritable output.
    """
    label = f"-o {out}"
    # before the work: a mistyped -o must not cost a report, a run store or a file of a run directory
    check_output_file(out, label, keep_run_files=True)
    runs = load_runs(list(run_dirs))
    plotly_src = None
    if assets is not None:
        library = _shared_plotly(assets)
        plotly_src = Path(os.path.relpath(library, Path(out).resolve().parent)).as_posix()
    page = build_report(runs, title=title, lowest=lowest, plotly_src=plotly_src)
    return write_output(out, page, label, keep_run_files=True)


def _shared_plotly(assets: Path) -> Path:
    """The plotting library in ``assets``, written once per plotly version."""
    import plotly
    from plotly.offline import get_plotlyjs

    library = assets.resolve() / f"plotly-{plotly.__version__}.min.js"
    if not library.is_file():
        assets.mkdir(parents=True, exist_ok=True)
        write_atomic(library, get_plotlyjs())
    return library
