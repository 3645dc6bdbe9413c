"""A small inline-SVG writer for the per-check charts (no network, no plotting library).

:func:`metric_chart` draws one metric across the fleet: one dot per (node,
label) value, the SKU threshold as a red dashed line, its warn band as an
amber dotted line, the fleet median as a blue line, and outliers, warnings and
failures as larger marked points with a ``<title>`` naming the node. Passing
points are drawn as one ``<path>`` (a round-capped zero-length segment per
point, one per pixel of the 760 x 200 view box), so a 1,024-node chart stays a handful of
DOM elements and a few kilobytes.
"""

from __future__ import annotations

import math
from html import escape
from typing import Any

from nvtest.report.model import MetricSeries, fmt_num

__all__ = ["metric_chart", "nice_ticks"]

W, H = 760, 200
ML, MR, MT, MB = 64, 16, 14, 34
COLOURS = {
    "pass": "#1a7f37",
    "warn": "#bf8700",
    "fail": "#cf222e",
    "error": "#8250df",
    "skip": "#6e7781",
}
MAX_MARKED = 400
NS = ' xmlns="http://www.w3.org/2000/svg"'


def nice_ticks(lo: float, hi: float, n: int = 4) -> list[float]:
    """About ``n`` round tick values covering ``[lo, hi]``."""
    if not math.isfinite(lo) or not math.isfinite(hi):
        return []
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / n
    if raw <= max(abs(lo), abs(hi)) * 1e-12:  # a span below float resolution: no steps to take
        return [lo, hi]
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step) * step
    ticks = []
    for k in range(4 * n + 2):  # bounded: ticks by index, never by accumulation
        t = first + k * step
        if t > hi + step * 1e-9:
            break
        ticks.append(round(t, 12))
    return ticks


def _range(s: MetricSeries) -> tuple[float, float]:
    vals = list(s.values)
    t = s.threshold or {}
    for key in ("min", "max", "warn_min", "warn_max"):
        if isinstance(t.get(key), (int, float)):
            vals.append(float(t[key]))
    if s.median is not None:
        vals.append(s.median)
    lo, hi = min(vals), max(vals)
    if lo >= 0 and (lo <= 0.5 * hi or hi == lo):
        lo = 0.0
    if hi == lo:
        hi = lo + (abs(lo) or 1.0)
    pad = (hi - lo) * 0.08
    return (lo if lo == 0 else lo - pad), hi + pad


def metric_chart(s: MetricSeries, node_names: list[str], title: str = "", *, xmlns: bool = False) -> str:
    """The SVG text of one metric's per-node chart; empty string when it has no value.

    ``xmlns`` adds the SVG namespace (needed by WeasyPrint; inline SVG in HTML needs none).
    """
    if not s.points:
        return ""
    n = max(len(node_names), 1)
    lo, hi = _range(s)
    pw, ph = W - ML - MR, H - MT - MB

    def x(i: int) -> float:
        return ML + pw * ((i + 0.5) / n)

    def y(v: float) -> float:
        return MT + ph * (1 - (v - lo) / (hi - lo))

    out = [
        f'<svg{NS if xmlns else ""} class="chart" viewBox="0 0 {W} {H}" role="img" '
        f'aria-label="{escape(title or s.name)}">',
        f"<title>{escape(title or s.name)}</title>",
        f'<rect x="{ML}" y="{MT}" width="{pw}" height="{ph}" fill="#fff" stroke="#d0d7de"/>',
    ]
    for tick in nice_ticks(lo, hi):
        yy = y(tick)
        out.append(f'<line x1="{ML}" x2="{ML + pw}" y1="{yy:.1f}" y2="{yy:.1f}" stroke="#eaeef2"/>')
        out.append(
            f'<text x="{ML - 6}" y="{yy + 4:.1f}" text-anchor="end" class="tick">{escape(fmt_num(float(tick)))}</text>'
        )
    out.append(
        f'<text x="12" y="{MT + ph / 2:.0f}" transform="rotate(-90 12 {MT + ph / 2:.0f})" '
        f'text-anchor="middle" class="tick">{escape(s.unit)}</text>'
    )
    thr: dict[str, Any] = s.threshold or {}
    for key, colour, dash, label in (
        ("min", "#cf222e", "6 4", "min"),
        ("max", "#cf222e", "6 4", "max"),
        ("warn_min", "#bf8700", "2 3", "warn"),
        ("warn_max", "#bf8700", "2 3", "warn"),
    ):
        v = thr.get(key)
        if isinstance(v, (int, float)) and lo <= v <= hi:
            yy = y(float(v))
            out.append(
                f'<line class="thr" x1="{ML}" x2="{ML + pw}" y1="{yy:.1f}" y2="{yy:.1f}" stroke="{colour}" '
                f'stroke-width="1.5" stroke-dasharray="{dash}"><title>{label} {escape(fmt_num(float(v)))} {escape(s.unit)}</title></line>'
            )
            out.append(
                f'<text x="{ML + pw - 4}" y="{yy - 4:.1f}" text-anchor="end" class="lab" fill="{colour}">{label} {escape(fmt_num(float(v)))}</text>'
            )
    if s.median is not None:
        yy = y(s.median)
        out.append(
            f'<line class="median" x1="{ML}" x2="{ML + pw}" y1="{yy:.1f}" y2="{yy:.1f}" stroke="#0969da" stroke-width="1.2">'
            f"<title>fleet median {escape(fmt_num(s.median))} {escape(s.unit)}</title></line>"
        )
        out.append(
            f'<text x="{ML + 4}" y="{yy - 4:.1f}" class="lab" fill="#0969da">median {escape(fmt_num(s.median))}</text>'
        )
    width = max(1.5, min(7.0, pw / n * 0.7))
    plain: dict[str, dict[tuple[int, int], None]] = {}
    marked: list[tuple[int, float, str, bool, str, str]] = []
    for i, v, verdict, outlier, node, lab in s.points:
        if (verdict in ("fail", "error", "warn") or outlier) and len(marked) < MAX_MARKED:
            marked.append((i, v, verdict, outlier, node, lab))
        else:  # one dot per pixel: at fleet scale most passing points fall on one another
            plain.setdefault(verdict, {})[(round(x(i)), round(y(v)))] = None
    for verdict, pixels in plain.items():
        segs = [f"M{px} {py}h0.1" for px, py in pixels]
        out.append(
            f'<path class="pts" d="{"".join(segs)}" stroke="{COLOURS.get(verdict, "#57606a")}" '
            f'stroke-width="{width:.1f}" stroke-linecap="round" fill="none" opacity=".75"/>'
        )
    r = max(3.0, width * 0.8)
    for i, v, verdict, outlier, node, lab in marked:
        colour = COLOURS.get(verdict, "#57606a")
        what = f"{node}{' ' + lab if lab else ''}: {fmt_num(v)} {s.unit} ({verdict}{', outlier' if outlier else ''})"
        shape = (
            f'<circle class="mark {escape(verdict)}" cx="{x(i):.1f}" cy="{y(v):.1f}" r="{r:.1f}" fill="{colour}" '
            f'stroke="#000" stroke-width="{1.5 if outlier else 0.5}"><title>{escape(what)}</title></circle>'
        )
        out.append(shape)
    if n <= 24:
        for i, name in enumerate(node_names):
            out.append(
                f'<text x="{x(i):.1f}" y="{H - MB + 14}" text-anchor="middle" class="tick">{escape(_short(name))}</text>'
            )
    else:
        out.append(f'<text x="{ML}" y="{H - MB + 14}" class="tick">{escape(_short(node_names[0]))}</text>')
        out.append(
            f'<text x="{ML + pw}" y="{H - MB + 14}" text-anchor="end" class="tick">{escape(_short(node_names[-1]))}</text>'
        )
        out.append(
            f'<text x="{ML + pw / 2:.0f}" y="{H - MB + 14}" text-anchor="middle" class="tick">{n} nodes, by name</text>'
        )
    out.append("</svg>")
    return "".join(out)


def _short(name: str, limit: int = 16) -> str:
    return name if len(name) <= limit else name[: limit - 1] + "…"
