"""report.html: one self-contained file rendered with jinja2 (autoescape on).

Layout: the verdict and run details first; the node x check matrix (rendered
in the browser from an embedded JSON blob, sortable, filterable, paginated,
a click on a cell opens the item's metrics in a side panel); one section per
check with a summary per metric and an inline SVG chart (threshold, fleet
median, outliers); diagnoses with next steps; inventory; thresholds and their
sources; links to every raw log.

Safety: every string from a node or a tool goes through jinja2's escaping or,
in the page's script, through ``textContent``; the embedded JSON escapes
``<``, ``>``, ``&``, U+2028 and U+2029 so no data can close the ``<script>``
element; links are made only to relative paths inside the run directory; a
Content-Security-Policy forbids every fetch (the file opens offline).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from importlib import resources
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup

from nvtest.report.asbuilt import asbuilt_view
from nvtest.report.blob import data_blob
from nvtest.report.history import history_view
from nvtest.report.model import (
    VERDICTS,
    ReportView,
    build_view,
    collapse,
    fmt_duration,
    fmt_num,
    fmt_time,
    labels_text,
    node_rack,
    rack_sku_rows,
    safe_log_link,
    threshold_text,
)
from nvtest.report.resilience import fmt_pct, resilience_view
from nvtest.report.svg import metric_chart
from nvtest.text import visible_value

__all__ = ["json_for_script", "make_env", "render_html", "safe_log_link"]


def json_for_script(obj: Any) -> Markup:
    """JSON text safe inside a ``<script>`` element (and an HTML attribute).

    ``<``, ``>``, ``&``, U+2028 and U+2029 become ``\\uXXXX`` escapes, which
    JSON.parse reads back unchanged.
    """
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=str)
    for ch, rep in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(ch, rep)
    return Markup(text)


def make_env() -> Environment:
    """The jinja2 environment of the report templates (autoescape always on)."""
    env = Environment(
        loader=PackageLoader("nvtest.report", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        finalize=visible_value,  # a tool's control characters are shown as escapes
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        time=fmt_time,
        num=fmt_num,
        duration=fmt_duration,
        loglink=safe_log_link,
        labels=labels_text,
        threshold=threshold_text,
        rack=node_rack,
        pct=fmt_pct,
        collapse=collapse,
    )
    env.globals["VERDICTS"] = VERDICTS
    return env


_ENV = make_env()


def asset(name: str) -> Markup:
    """A static file of ``nvtest/report/templates`` inlined as is (our own CSS or JS, no data)."""
    return Markup(resources.files("nvtest.report").joinpath("templates", name).read_text(encoding="utf-8"))


def gpu_text(inv: Mapping[str, Any]) -> str:
    """``8x NVIDIA H100 80GB HBM3`` (or ``none``) from a node's inventory."""
    names = [str(g.get("name") or "?") for g in inv.get("gpus") or []]
    if not names:
        return "none"
    counts: dict[str, int] = {}
    for name in names:
        counts[name] = counts.get(name, 0) + 1
    return ", ".join(f"{k}x {name}" for name, k in counts.items())


def config_groups(view: ReportView) -> list[dict[str, Any]]:
    """Nodes grouped by identical configuration (SKU, GPUs, driver, CUDA, VBIOS), largest first."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for n in view.node_names:
        nd = view.nodes[n]
        inv = nd.get("inventory") or {}
        if not inv:
            key: tuple[str, ...] = (str(nd.get("sku") or "-"), "no inventory", "-", "-", "-")
        else:
            vb = sorted({str(g.get("vbios")) for g in inv.get("gpus") or [] if g.get("vbios")})
            key = (
                str(nd.get("sku") or "-"),
                gpu_text(inv),
                str(inv.get("driver_version") or "-"),
                str(inv.get("cuda_version") or "-"),
                ", ".join(vb) or "-",
            )
        groups.setdefault(key, []).append(n)
    out = [
        {"sku": k[0], "gpus": k[1], "driver": k[2], "cuda": k[3], "vbios": k[4], "nodes": ns}
        for k, ns in groups.items()
    ]
    return sorted(out, key=lambda g: -len(g["nodes"]))


def _down_groups(view: ReportView) -> list[tuple[str, list[str]]]:
    """Unreachable nodes by reason, most first: one row for 500 nodes with one reason."""
    groups: dict[str, list[str]] = {}
    for n, why in view.down.items():
        groups.setdefault(" ".join(why.split()), []).append(n)
    return sorted(groups.items(), key=lambda kv: -len(kv[1]))


def template_context(view: ReportView, *, xmlns: bool = False, evidence: str | None = None) -> dict[str, Any]:
    """What both templates (HTML and PDF) are rendered with: the view, charts, SKUs,
    configurations, and ``evidence``: the run's evidence digest (None: not shown)."""
    charts = {
        (c.name, s.name): Markup(metric_chart(s, view.node_names, f"{c.title}: {s.name}", xmlns=xmlns))
        for c in view.checks
        for s in c.series
    }
    skus = sorted({str(nd["sku"]) for nd in view.nodes.values() if nd.get("sku")} | set(view.skus))
    return {
        "v": view,
        "doc": view.doc,
        "run": view.run,
        "summary": view.summary,
        "sku_names": skus,
        "charts": charts,
        "groups": config_groups(view),
        "rs": resilience_view(view.doc.get("results") or []),
        "hv": history_view(view.doc),
        "racks_skus": rack_sku_rows(view),
        "down_groups": _down_groups(view),
        "evidence": evidence,
        "rejudged": (view.run.get("rejudged") or None),
        "ab": asbuilt_view(view.doc),
    }


def render_html(doc: Mapping[str, Any], view: ReportView | None = None, *, evidence: str | None = None) -> str:
    """Return the report.html text for a results.json document (``evidence``: the run's
    evidence digest shown on the first screen, see :mod:`nvtest.report.manifest`)."""
    view = view or build_view(doc)
    return _ENV.get_template("report.html.j2").render(
        **template_context(view, evidence=evidence),
        css=asset("report.css"),
        js=asset("report.js"),
        data=json_for_script(data_blob(view)),
    )
