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
from nvtest.report.history import history_view
from nvtest.report.model import (
    VERDICTS,
    ReportView,
    build_view,
    fmt_duration,
    fmt_num,
    fmt_time,
    labels_text,
    node_rack,
    node_tags,
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
    )
    env.globals["VERDICTS"] = VERDICTS
    return env


_ENV = make_env()


def asset(name: str) -> Markup:
    """A static file of ``nvtest/report/templates`` inlined as is (our own CSS or JS, no data)."""
    return Markup(
        resources.files("nvtest.report").joinpath("templates", name).read_text(encoding="utf-8")
    )


def _finite(v: Any) -> Any:
    """JSON-safe number, about six significant digits (NaN and infinities as text)."""
    if v.__class__ is float:
        if v != v or v in (_INF, -_INF):
            return str(v)
        return round(v, 4) if abs(v) >= 1 else float(f"{v:.6g}")
    return v


def _raw(v: Any) -> Any:
    """A measured value as JSON can carry it (NaN and infinities as text), unrounded."""
    if isinstance(v, float) and (v != v or v in (_INF, -_INF)):
        return str(v)
    return v


_INF = float("inf")
_THRESHOLD_KEYS = ("min", "max", "warn_min", "warn_max", "unit", "source", "origin")


def _inventory_blob(nd: Mapping[str, Any]) -> dict[str, Any]:
    inv = nd.get("inventory") or {}
    gpus = []
    for g in inv.get("gpus") or []:
        gpus.append(
            [
                g.get("index"),
                g.get("name"),
                g.get("serial"),
                g.get("uuid"),
                g.get("pci_bus_id"),
                g.get("memory_mib"),
                g.get("vbios"),
                g.get("ecc_mode"),
                f"Gen{g.get('pcie_gen_current') or '?'}/Gen{g.get('pcie_gen_max') or '?'} "
                f"x{g.get('pcie_width_current') or '?'}/x{g.get('pcie_width_max') or '?'}",
                _downgraded(g),
                g.get("mig_mode"),
            ]
        )
    nics = []
    for n in inv.get("nics") or inv.get("hcas") or []:
        if isinstance(n, Mapping):
            nics.append(
                [
                    n.get("name") or n.get("slot"),
                    n.get("model") or n.get("device") or n.get("ca_type"),
                    n.get("firmware") or n.get("fw_ver") or n.get("fw_version"),
                    n.get("state") or n.get("rate") or n.get("driver"),
                ]
            )
    if not nics:
        for p in inv.get("pci") or []:
            cid = str(p.get("class_id") or "")
            if (
                cid.startswith("02")
                or "Ethernet" in str(p.get("class_name"))
                or "Infiniband" in str(p.get("class_name"))
            ):
                nics.append(
                    [
                        p.get("slot"),
                        f"{p.get('vendor', '')} {p.get('device', '')}".strip(),
                        None,
                        p.get("driver"),
                    ]
                )
    covered = {
        "host",
        "cpu_model",
        "sockets",
        "cores",
        "threads",
        "memory_total_kib",
        "os",
        "kernel",
        "python",
        "libraries",
        "tools",
        "driver_version",
        "cuda_version",
        "gpus",
        "pci",
        "gpu_absent_reason",
        "notes",
        "gpu_count",
        "nics",
        "hcas",
    }
    other = [
        [k, str(v)]
        for k, v in inv.items()
        if k not in covered and isinstance(v, (str, int, float)) and not isinstance(v, bool)
    ]
    for k, v in inv.items():
        if k not in covered and isinstance(v, Mapping):
            other.extend(
                [f"{k}.{kk}", str(vv)] for kk, vv in v.items() if isinstance(vv, (str, int, float))
            )
    mem = inv.get("memory_total_kib")
    return {
        "cpu": inv.get("cpu_model"),
        "cores": inv.get("cores"),
        "sockets": inv.get("sockets"),
        "mem": round(mem / 1048576, 1) if isinstance(mem, (int, float)) else None,
        "os": inv.get("os"),
        "kernel": inv.get("kernel"),
        "driver": inv.get("driver_version"),
        "cuda": inv.get("cuda_version"),
        "gpus": gpus,
        "gpuAbsent": inv.get("gpu_absent_reason"),
        "nics": nics,
        "other": other,
        "notes": [str(x) for x in inv.get("notes") or []],
        "skuMatch": [str(x) for x in nd.get("sku_match") or []],
        "log": safe_log_link(nd.get("inventory_log")),
    }


def _downgraded(g: Mapping[str, Any]) -> bool:
    pairs = (("pcie_gen_current", "pcie_gen_max"), ("pcie_width_current", "pcie_width_max"))
    return any(
        isinstance(g.get(a), int) and isinstance(g.get(b), int) and g[a] < g[b] for a, b in pairs
    )


def data_blob(view: ReportView) -> dict[str, Any]:
    """The JSON the page's script renders the matrix, panels and long tables from."""
    checks = [c.name for c in view.checks]
    thresholds: list[list[str]] = []
    tindex: dict[tuple[str, ...], int] = {}
    code = {"pass": "p", "warn": "w", "fail": "f", "error": "e", "skip": "s"}
    nodes = []
    items: dict[str, Any] = {}
    inventory: dict[str, Any] = {}
    for n in view.node_names:
        nd = view.nodes[n]
        row = view.matrix.get(n, {})
        cells = "".join(code.get(row[c]["verdict"], "s") if c in row else "-" for c in checks)
        tags = node_tags(nd)
        nodes.append(
            {
                "n": n,
                "v": nd.get("verdict") or "skip",
                "r": node_rack(nd),
                "s": nd.get("sku") or "",
                "t": " ".join(f"{k}={v}" for k, v in tags.items()),
                "c": cells,
                "d": nd.get("down_reason") or "",
                "dr": view.drained.get(n, ""),
                "ev": [[label, link] for label, link in view.evidence.get(n, [])],
            }
        )
        inventory[n] = _inventory_blob(nd)
        for ci, c in enumerate(checks):
            r = row.get(c)
            if r is None:
                continue
            ms = []
            for m in r.get("metrics") or []:
                t = m.get("threshold")
                ti = -1
                if t:
                    raw_key = tuple(map(str, (t.get(k) for k in _THRESHOLD_KEYS)))
                    ti = tindex.get(raw_key, -1)
                    if ti < 0:
                        ti = tindex[raw_key] = len(thresholds)
                        thresholds.append(
                            [
                                threshold_text(t),
                                str(t.get("source") or ""),
                                str(t.get("origin") or ""),
                            ]
                        )
                f = m.get("fleet")
                fleet = (
                    [
                        _finite(f.get("median")),
                        _finite(f.get("delta_pct")),
                        _finite(f.get("robust_z")),
                        bool(f.get("outlier")),
                    ]
                    if f
                    else None
                )
                labels = m.get("labels")
                verdict = m.get("verdict")
                ms.append(
                    [
                        m.get("name"),
                        " ".join(f"{k}={v}" for k, v in labels.items()) if labels else "",
                        _raw(m.get("value")),
                        m.get("unit") or "",
                        verdict,
                        "" if verdict == "pass" else m.get("reason") or "",
                        ti,
                        fleet,
                    ]
                )
            diag = r.get("diagnosis") or None
            items[f"{ci}|{n}"] = {
                "v": r.get("verdict"),
                "r": r.get("reason") or "",
                "l": safe_log_link(r.get("log")),
                "d": [
                    str(diag.get("cause", "")),
                    str(diag.get("action", "")),
                    str(diag.get("class", "")),
                ]
                if diag
                else None,
                "t": r.get("duration_s"),
                "m": ms,
            }
    return {
        "checks": [{"name": c.name, "title": c.title} for c in view.checks],
        "nodes": nodes,
        "items": items,
        "thresholds": thresholds,
        "inventory": inventory,
    }


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


def template_context(view: ReportView, *, xmlns: bool = False) -> dict[str, Any]:
    """What both templates (HTML and PDF) are rendered with: the view, charts, SKUs, configurations."""
    charts = {
        (c.name, s.name): Markup(
            metric_chart(s, view.node_names, f"{c.title}: {s.name}", xmlns=xmlns)
        )
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
        "ab": asbuilt_view(view.doc),
    }


def render_html(doc: Mapping[str, Any], view: ReportView | None = None) -> str:
    """Return the report.html text for a results.json document."""
    view = view or build_view(doc)
    return _ENV.get_template("report.html.j2").render(
        **template_context(view),
        css=asset("report.css"),
        js=asset("report.js"),
        data=json_for_script(data_blob(view)),
    )
