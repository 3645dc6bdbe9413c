"""report.pdf: a printable acceptance document rendered from results.json.

Pages: a cover (verdict, run details, node counts), the summary per check
(measured vs threshold, charts), the per-node table, the failures with their
diagnoses, the thresholds and their sources. Tables repeat their header on
each page and never split a row; headings become PDF bookmarks.

Engines, in order: WeasyPrint (``pip install 'nvtest[pdf]'``; needs Pango,
Debian ``libpango-1.0-0 libpangoft2-1.0-0``), then a headless Chromium
(``--print-to-pdf``) when WeasyPrint is not importable. The HTML given to
either engine loads nothing from outside (a ``url_fetcher`` that refuses
every URL for WeasyPrint; Chromium started offline).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nvtest.errors import ConfigError
from nvtest.report.chromium import OFFLINE_FLAGS, find_chromium
from nvtest.report.html import asset, gpu_text, make_env, template_context
from nvtest.report.model import ReportView, build_view

__all__ = ["pdf_html", "write_pdf"]

_ENV = make_env()


def _node_rows(view: ReportView) -> list[dict[str, Any]]:
    rows = []
    for n in view.node_names:
        nd = view.nodes[n]
        inv = nd.get("inventory") or {}
        bad = [
            c.name for c in view.checks if view.matrix.get(n, {}).get(c.name, {}).get("verdict") in ("fail", "error")
        ]
        warn = [c.name for c in view.checks if view.matrix.get(n, {}).get(c.name, {}).get("verdict") == "warn"]
        rows.append(
            {
                "name": n,
                "verdict": nd.get("verdict") or "skip",
                "rack": (nd.get("settings") or {}).get("tags", {}).get("rack", "")
                if isinstance((nd.get("settings") or {}).get("tags"), Mapping)
                else "",
                "sku": nd.get("sku") or "-",
                "gpus": gpu_text(inv) if inv else "-",
                "driver": inv.get("driver_version") or "-",
                "bad": bad,
                "warn": warn,
                "down": nd.get("down_reason") or "",
                "drained": view.drained.get(n, ""),
            }
        )
    return rows


def pdf_html(doc: Mapping[str, Any], evidence: str | None = None) -> str:
    """The print-only HTML (no script) that becomes report.pdf (``evidence``: the digest on page one)."""
    view = build_view(doc)
    return _ENV.get_template("report_pdf.html.j2").render(
        **template_context(view, xmlns=True, evidence=evidence),
        node_rows=_node_rows(view),
        css=asset("report_pdf.css"),
    )


def _refuse_fetch(url: str, *args: Any, **kwargs: Any) -> Any:
    raise ValueError(f"report.pdf loads nothing from outside (refused {url[:80]!r})")


def write_pdf(run_dir: Path, doc: Mapping[str, Any], engine: str | None = None, *, evidence: str | None = None) -> Path:
    """Write ``run_dir/report.pdf`` and return its path.

    Args:
        engine: ``weasyprint``, ``chromium`` or None (WeasyPrint if importable, else Chromium).
        evidence: the run's evidence digest, printed on the first page (None: not shown).

    Raises:
        ConfigError: no engine available (the message says what to install), or it failed.
    """
    out = run_dir / "report.pdf"
    html = pdf_html(doc, evidence)
    if engine is None:
        engine = "weasyprint" if importlib.util.find_spec("weasyprint") is not None else "chromium"
    if engine == "weasyprint":
        try:
            import weasyprint
        except (ImportError, OSError) as exc:
            raise ConfigError(
                f"--pdf needs WeasyPrint and Pango: pip install 'nvtest[pdf]'; apt-get install libpango-1.0-0 libpangoft2-1.0-0 ({exc})",
                field="--pdf",
            ) from exc
        tmp = out.with_suffix(".pdf.tmp")
        weasyprint.HTML(string=html, base_url=str(run_dir), url_fetcher=_refuse_fetch).write_pdf(str(tmp))
        tmp.replace(out)
        return out
    exe = find_chromium()
    if exe is None:
        raise ConfigError(
            "--pdf needs WeasyPrint (pip install 'nvtest[pdf]') or a Chromium on PATH (apt-get install chromium)",
            field="--pdf",
        )
    with tempfile.TemporaryDirectory(prefix="nvtest-pdf-") as td:
        src = Path(td) / "report_pdf.html"
        src.write_text(html, encoding="utf-8")
        cmd = [
            exe,
            *OFFLINE_FLAGS,
            f"--user-data-dir={td}/profile",
            "--no-pdf-header-footer",
            f"--print-to-pdf={out}",
            src.as_uri(),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env={**os.environ, "LANG": "C.UTF-8"})
    if proc.returncode != 0 or not out.exists():
        raise ConfigError(
            f"chromium --print-to-pdf failed (exit {proc.returncode}): {proc.stderr[-300:]}",
            field="--pdf",
        )
    return out
