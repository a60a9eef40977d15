"""Results people can look at: the HTML report, the terminal view, comparisons and exports.

``write_report(run_dirs, out)`` → one self-contained HTML file; ``load_run`` / ``load_runs`` read run
directories; ``headline_tables`` + ``export`` give the headline numbers as CSV/JSON/Markdown;
``compare_runs`` tests per task whether one run beats another on shared questions; ``render_summary`` is
the terminal table of an eval summary. Names are imported lazily (plotly and scipy load on first use), so
the CLI starts fast.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "build_report": "html", "write_report": "html",
    "Comparison": "compare", "compare_runs": "compare",
    "Run": "load", "load_run": "load", "load_runs": "load",
    "EXPORT_FORMATS": "tables", "Table": "tables", "export": "tables", "headline_tables": "headlines",
    "render_summary": "view",
}

__all__ = [
    "EXPORT_FORMATS", "Comparison", "Run", "Table", "build_report", "compare_runs", "export", "headline_tables",
    "load_run", "load_runs", "render_summary", "write_report",
]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"personagraph.report.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module 'personagraph.report' has no attribute {name!r}")
