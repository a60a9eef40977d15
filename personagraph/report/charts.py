"""Plotly figures for the report. Every label that came from a run (persona, model, judge names, model
output) is HTML-escaped first: plotly renders a subset of HTML in labels, and run data is untrusted text."""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

PALETTE = ("#4C78A8", "#F58518", "#54A24B", "#E45756", "#72B7B2", "#B279A2", "#FF9DA6", "#9D755D", "#BAB0AC",
           "#EECA3B")
FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, Helvetica, Arial, sans-serif"


def label(text: Any, limit: int = 60) -> str:
    """Run data as a safe plotly label: shortened and HTML-escaped."""
    value = " ".join(str(text).split())
    if len(value) > limit:
        value = value[: limit - 1] + "…"
    return html.escape(value)


def color(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


def _layout(fig: go.Figure, *, height: int, title: str | None = None, top: int = 70, sides: int = 20,
            **extra: Any) -> go.Figure:
    """Common layout: title top left, the legend on the line below it, then the plot (``top`` px down)."""
    fig.update_layout(
        template="plotly_white", height=height, font={"family": FONT, "size": 12},
        margin={"l": max(60, sides), "r": sides, "t": top, "b": 45},
        title={"text": html.escape(title), "x": 0.0, "xanchor": "left", "y": 1.0, "yanchor": "top",
               "pad": {"t": 12, "l": 4}} if title else None,
        legend={"orientation": "h", "yanchor": "top", "y": 1.0 - (40 if title else 6) / height, "x": 0.0,
                "xanchor": "left", "yref": "container", "bgcolor": "rgba(255,255,255,0)"},
        **extra,
    )
    return fig


def _closed(values: Sequence[float | None], names: Sequence[str]) -> tuple[list[float | None], list[str]]:
    return [*values, values[0]], [*names, names[0]]


def radar(series: dict[str, dict[str, float | None]], axes: Sequence[str], *, title: str,
          scale: tuple[float, float] = (1, 5)) -> go.Figure:
    """All series on one radar (one closed line per series over ``axes``)."""
    fig = go.Figure()
    theta_names = [label(a, 30) for a in axes]
    for index, (name, values) in enumerate(series.items()):
        r, theta = _closed([values.get(a) for a in axes], theta_names)
        fig.add_trace(go.Scatterpolar(
            r=r, theta=theta, name=label(name, 40), mode="lines+markers", fill="toself", opacity=0.75,
            line={"color": color(index), "width": 2}, connectgaps=False,
            hovertemplate="%{theta}: %{r:.2f}<extra>" + label(name, 40) + "</extra>",
        ))
    fig.update_polars(radialaxis={"range": list(scale), "tickvals": list(range(int(scale[0]), int(scale[1]) + 1))})
    return _layout(fig, height=480, title=title, top=90, showlegend=True)


def radar_grid(series: dict[str, dict[str, float | None]], axes: Sequence[str], *, title: str,
               scale: tuple[float, float] = (1, 5), per_row: int = 3) -> go.Figure:
    """One small radar per series."""
    names = list(series)
    cols = min(per_row, max(1, len(names)))
    rows = math.ceil(len(names) / cols)
    fig = make_subplots(rows=rows, cols=cols, specs=[[{"type": "polar"}] * cols for _ in range(rows)],
                        subplot_titles=[label(n, 40) for n in names], horizontal_spacing=0.12,
                        vertical_spacing=0.16 if rows > 1 else 0.1)
    theta_names = [label(a, 22) for a in axes]
    for index, name in enumerate(names):
        r, theta = _closed([series[name].get(a) for a in axes], theta_names)
        fig.add_trace(go.Scatterpolar(
            r=r, theta=theta, name=label(name, 40), mode="lines+markers", fill="toself",
            line={"color": color(index), "width": 2}, showlegend=False,
            hovertemplate="%{theta}: %{r:.2f}<extra></extra>",
        ), row=index // cols + 1, col=index % cols + 1)
    fig.update_polars(radialaxis={"range": list(scale), "tickvals": list(range(int(scale[0]), int(scale[1]) + 1)),
                                  "tickfont": {"size": 9}},
                      angularaxis={"tickfont": {"size": 10}})
    fig.update_annotations(yshift=22, font={"size": 13})
    return _layout(fig, height=380 * rows + 30, title=title, top=90, sides=80)


def score_distributions(scores: list[dict[str, Any]], tasks: Sequence[str], judges: Sequence[str], *,
                        title: str, scale: Sequence[int] = (1, 2, 3, 4, 5)) -> go.Figure:
    """Per task, the share of each score given by each judge (grouped bars): where judges disagree."""
    cols = len(tasks)
    fig = make_subplots(rows=1, cols=cols, shared_yaxes=True, subplot_titles=[label(t, 24) for t in tasks],
                        horizontal_spacing=0.02)
    for j, judge in enumerate(judges):
        for t, task in enumerate(tasks):
            mine = [s["score"] for s in scores if s["judge"] == judge and s["task"] == task]
            n = len(mine)
            shares = [(sum(1 for s in mine if s == value) / n) if n else 0 for value in scale]
            mean = sum(mine) / n if n else None
            fig.add_trace(go.Bar(
                x=[str(v) for v in scale], y=shares, name=label(judge, 40), legendgroup=judge,
                marker_color=color(j), showlegend=t == 0,
                customdata=[[sum(1 for s in mine if s == v), n] for v in scale],
                hovertemplate=(label(judge, 40) + f" · {label(task, 30)}<br>score %{{x}}: %{{customdata[0]}} of "
                               "%{customdata[1]} (%{y:.0%})"
                               + (f"<br>mean {mean:.2f}" if mean is not None else "") + "<extra></extra>"),
            ), row=1, col=t + 1)
    fig.update_yaxes(tickformat=".0%", rangemode="tozero")
    fig.update_yaxes(title_text="share of verdicts", row=1, col=1)
    fig.update_xaxes(title_text="score", type="category")
    fig.update_layout(barmode="group", bargap=0.25)
    fig.update_annotations(font={"size": 12})
    return _layout(fig, height=380, title=title, top=110)


def lines(series: dict[str, tuple[Sequence[float], Sequence[float | None]]], *, title: str, x_title: str,
          y_title: str, y_range: Sequence[float] | None = None,
          markers: dict[str, list[tuple[float, float, str]]] | None = None, height: int = 380) -> go.Figure:
    """Lines (x, y) per series, with optional highlighted points (x, y, hover text) per series."""
    fig = go.Figure()
    for index, (name, (xs, ys)) in enumerate(series.items()):
        fig.add_trace(go.Scatter(x=list(xs), y=list(ys), name=label(name, 50), mode="lines+markers",
                                 line={"color": color(index), "width": 2}, connectgaps=False,
                                 legendgroup=name))
        for x, y, text in (markers or {}).get(name, []):
            fig.add_trace(go.Scatter(
                x=[x], y=[y], mode="markers", showlegend=False, legendgroup=name,
                marker={"symbol": "x", "size": 14, "color": "#d62728", "line": {"width": 2, "color": "#d62728"}},
                hovertemplate=label(text, 120) + "<extra></extra>",
            ))
    fig.update_xaxes(title_text=html.escape(x_title))
    fig.update_yaxes(title_text=html.escape(y_title), range=list(y_range) if y_range else None)
    return _layout(fig, height=height, title=title, top=90)


def line_grid(panels: dict[str, dict[str, tuple[Sequence[float], Sequence[float | None]]]], *, title: str,
              x_title: str, per_row: int = 3) -> go.Figure:
    """One small line chart per panel (e.g. per metric), the same series (colour) in each."""
    names = list(panels)
    cols = min(per_row, max(1, len(names)))
    rows = math.ceil(len(names) / cols)
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=[label(n, 30) for n in names],
                        horizontal_spacing=0.07, vertical_spacing=0.22 if rows > 1 else 0.1)
    series_names = list(dict.fromkeys(s for panel in panels.values() for s in panel))
    for p, name in enumerate(names):
        for s, (xs, ys) in panels[name].items():
            index = series_names.index(s)
            fig.add_trace(go.Scatter(x=list(xs), y=list(ys), name=label(s, 40), legendgroup=s, mode="lines+markers",
                                     line={"color": color(index), "width": 2}, showlegend=p == 0),
                          row=p // cols + 1, col=p % cols + 1)
    fig.update_xaxes(title_text=html.escape(x_title), type="category")
    fig.update_annotations(font={"size": 12})
    return _layout(fig, height=300 * rows + 60, title=title, top=100)


def bars(categories: Sequence[str], series: dict[str, Sequence[float | None]], *, title: str, y_title: str,
         height: int = 360, y_range: Sequence[float] | None = None) -> go.Figure:
    """Grouped bars: one group per category, one bar per series."""
    fig = go.Figure()
    for index, (name, values) in enumerate(series.items()):
        fig.add_trace(go.Bar(x=[label(c, 30) for c in categories], y=list(values), name=label(name, 40),
                             marker_color=color(index)))
    fig.update_yaxes(title_text=html.escape(y_title), range=list(y_range) if y_range else None)
    fig.update_layout(barmode="group", showlegend=True)
    return _layout(fig, height=height, title=title, top=90)


def sample_spread(questions: dict[str, list[dict[str, Any]]], *, title: str) -> go.Figure:
    """Repeated samples: per question (grouped by task), each sample's score as a dot and the range of the
    question's samples as a bar around their mean, one colour per series (model)."""
    fig = go.Figure()
    for index, (name, rows) in enumerate(questions.items()):
        xs = [f"{label(row['task'], 24)} · q{n + 1}" for n, row in enumerate(rows)]
        means = [sum(row["scores"]) / len(row["scores"]) if row["scores"] else None for row in rows]
        fig.add_trace(go.Scatter(
            x=xs, y=means, name=label(name, 40), mode="markers", legendgroup=name,
            marker={"color": color(index), "size": 11, "symbol": "line-ew-open", "line": {"width": 3}},
            error_y={"type": "data", "symmetric": False, "color": color(index), "thickness": 2, "width": 6,
                     "array": [max(r["scores"]) - m if m is not None else None for r, m in zip(rows, means, strict=True)],
                     "arrayminus": [m - min(r["scores"]) if m is not None else None
                                    for r, m in zip(rows, means, strict=True)]},
            hovertemplate="%{x}: mean %{y:.2f}<extra>" + label(name, 40) + "</extra>",
        ))
        dots = [(x, s) for x, row in zip(xs, rows, strict=True) for s in row["scores"]]
        fig.add_trace(go.Scatter(
            x=[x for x, _ in dots], y=[s for _, s in dots], mode="markers", showlegend=False, legendgroup=name,
            marker={"color": color(index), "size": 7, "opacity": 0.6},
            hovertemplate="%{x}: sample score %{y:.2f}<extra>" + label(name, 40) + "</extra>",
        ))
    fig.update_yaxes(title_text="score", range=[0.8, 5.2])
    fig.update_xaxes(tickangle=-45, type="category")
    return _layout(fig, height=420, title=title, top=90)
