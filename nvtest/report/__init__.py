"""Reports rendered from ``results.json`` alone (never touching a node).

``render_all(run_dir)`` writes, beside ``results.json``:

- ``report.html``: the self-contained report (:mod:`nvtest.report.html`)
- ``junit.xml``: one testcase per (check, node) (:mod:`nvtest.report.junit`)
- ``results.csv`` and, where pyarrow is installed, ``results.parquet``
  (:mod:`nvtest.report.tables`)
- ``report.pdf`` when asked (:mod:`nvtest.report.pdf`)

so ``nvtest report RUN_DIR`` works on a copied run directory. The reports show the run's
evidence digest (:func:`nvtest.report.manifest.evidence_digest`), taken after every other
file is written; ``finish_run`` then writes ``manifest.sha256`` over all of them.

The terminal's consoles and plain tables, which every verb prints with, are
:mod:`nvtest.report.console`. The renderers (Jinja2, pandas) load only when a report is
rendered: ``render_html`` and ``render_junit`` are named here lazily, so a verb that imports
the consoles does not pay for them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from nvtest.errors import OutputWriteError
from nvtest.report.manifest import evidence_digest
from nvtest.results import load_results, write_atomic

if TYPE_CHECKING:
    from nvtest.report.html import render_html
    from nvtest.report.junit import render_junit

__all__ = ["render_all", "render_html", "render_junit", "render_pdf"]


def __getattr__(name: str) -> Any:
    """``render_html`` and ``render_junit``, imported on first use."""
    if name == "render_html":
        from nvtest.report.html import render_html

        return render_html
    if name == "render_junit":
        from nvtest.report.junit import render_junit

        return render_junit
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def render_pdf(run_dir: Path, doc: dict[str, Any] | None = None, evidence: str | None = None) -> Path:
    """Write ``run_dir/report.pdf``; see :func:`nvtest.report.pdf.write_pdf`.

    ``evidence``: the evidence digest to print on its first page; None takes it from
    ``run_dir`` now.

    Raises:
        ConfigError: results.json is unreadable.
        ReportError: no PDF engine is available (WeasyPrint or Chromium).
    """
    from nvtest.report.pdf import write_pdf

    if doc is None:
        doc = load_results(run_dir)
    return write_pdf(run_dir, doc, evidence=evidence or _evidence(run_dir))


def _evidence(run_dir: Path) -> str:
    try:
        return evidence_digest(run_dir)
    except OSError as exc:
        raise OutputWriteError.of(run_dir, exc) from exc


def render_all(run_dir: Path, doc: dict[str, Any] | None = None, *, pdf: bool = False) -> list[Path]:
    """Render every report of ``run_dir``; return the paths written.

    Each file is written whole or not at all (:func:`nvtest.results.write_atomic`): a
    full disk leaves the previous report, never a truncated one.

    Raises:
        ConfigError: results.json is missing, unreadable or of another schema version.
        OutputWriteError: a file could not be written (its path and errno).
        ReportError: ``pdf`` was asked and no PDF engine is available.
    """
    from nvtest.report.html import render_html
    from nvtest.report.junit import render_junit
    from nvtest.report.model import build_view
    from nvtest.report.tables import write_tables

    if doc is None:
        doc = load_results(run_dir)
    view = build_view(doc)
    junit = write_atomic(run_dir / "junit.xml", render_junit(doc))
    tables = write_tables(run_dir, doc)
    evidence = _evidence(run_dir)  # every file but the reports is written: what they show
    html = write_atomic(run_dir / "report.html", render_html(doc, view, evidence=evidence))
    paths = [html, junit, *tables]
    if pdf:
        paths.append(render_pdf(run_dir, doc, evidence))
    return paths
