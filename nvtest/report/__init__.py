"""Reports rendered from ``results.json`` alone (never touching a node).

``render_all(run_dir)`` writes ``report.html`` and ``junit.xml`` beside
``results.json``, so ``nvtest report RUN_DIR`` works on a copied run directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nvtest.report.html import render_html
from nvtest.report.junit import render_junit
from nvtest.results import load_results

__all__ = ["render_all", "render_html", "render_junit"]


def render_all(run_dir: Path, doc: dict[str, Any] | None = None) -> list[Path]:
    """Render every report of ``run_dir``; return the paths written.

    Raises:
        ConfigError: results.json is missing, unreadable or of another schema version.
    """
    if doc is None:
        doc = load_results(run_dir)
    html = run_dir / "report.html"
    html.write_text(render_html(doc), encoding="utf-8")
    junit = run_dir / "junit.xml"
    junit.write_text(render_junit(doc), encoding="utf-8")
    return [html, junit]
