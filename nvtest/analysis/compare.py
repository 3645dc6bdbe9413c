"""Compare two runs: per node and metric, what got better or worse (e.g. before and after a repair).

Metrics are matched by (node, check, metric name, labels). A change is judged

1. by its verdict first: a verdict that got less severe is ``better`` (fail ->
   pass), more severe is ``worse``;
2. else by the threshold's direction: a metric with a ``min`` is better higher,
   one with a ``max`` better lower; a relative change within ``tolerance_pct``
   is ``same``;
3. a metric with neither is ``changed`` (or ``same`` within the tolerance).

Items only in one run are ``new`` or ``gone``. Reads two results.json files
(:func:`nvtest.results.load_results`); touches no node.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from html import escape
from typing import Any

from nvtest.errors import ConfigError
from nvtest.report.model import fmt_num, labels_text
from nvtest.verdict import rank_of

__all__ = ["Change", "compare_docs", "render_compare_html", "summarise"]

#: Order in which changes are listed: what needs attention first.
KIND_ORDER = {"worse": 0, "gone": 1, "new": 2, "better": 3, "changed": 4, "same": 5}


@dataclass(frozen=True)
class Change:
    """One (node, check, metric) across two runs; ``metric`` is empty for an item without metrics."""

    node: str
    check: str
    metric: str
    labels: str
    unit: str
    a: float | None
    b: float | None
    verdict_a: str | None
    verdict_b: str | None
    kind: str

    @property
    def delta_pct(self) -> float | None:
        """Relative change from A to B in percent (None when either side is missing or A is 0)."""
        if self.a is None or self.b is None or self.a == 0:
            return None
        return 100.0 * (self.b - self.a) / abs(self.a)


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _index(doc: Mapping[str, Any]) -> dict[tuple[str, str, str, str], dict[str, Any]]:
    out: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    for r in doc.get("results") or []:
        metrics = r.get("metrics") or []
        if not metrics:
            out[(r["node"], r["check"], "", "")] = {
                "value": None,
                "unit": "",
                "verdict": r["verdict"],
                "threshold": None,
            }
        for m in metrics:
            key = (r["node"], r["check"], str(m["name"]), labels_text(m.get("labels")))
            out[key] = {
                "value": _num(m.get("value")),
                "unit": m.get("unit") or "",
                "verdict": m.get("verdict"),
                "threshold": m.get("threshold"),
            }
    return out


def _kind(a: Mapping[str, Any], b: Mapping[str, Any], tolerance_pct: float) -> str:
    ra, rb = rank_of(str(a["verdict"])), rank_of(str(b["verdict"]))
    if a["verdict"] != b["verdict"] and "skip" not in (a["verdict"], b["verdict"]):
        return "better" if rb < ra else "worse"
    va, vb = a["value"], b["value"]
    if va is None or vb is None:
        return "same" if va == vb and a["verdict"] == b["verdict"] else "changed"
    rel = abs(vb - va) / abs(va) * 100 if va else (0.0 if vb == va else 100.0)
    if rel <= tolerance_pct:
        return "same"
    t = b.get("threshold") or a.get("threshold") or {}
    if t.get("min") is not None or t.get("warn_min") is not None:
        return "better" if vb > va else "worse"
    if t.get("max") is not None or t.get("warn_max") is not None:
        return "better" if vb < va else "worse"
    return "changed"


def compare_docs(doc_a: Mapping[str, Any], doc_b: Mapping[str, Any], tolerance_pct: float = 2.0) -> list[Change]:
    """Every (node, check, metric) of either run, judged; worst first, then by node, check, metric.

    ``tolerance_pct``: a relative change within this many percent is ``same``.

    Raises:
        ConfigError: ``tolerance_pct`` is negative or not a finite number.
    """
    if not isinstance(tolerance_pct, (int, float)) or not math.isfinite(tolerance_pct) or tolerance_pct < 0:
        raise ConfigError(f"must be a finite number of percent >= 0, not {tolerance_pct!r}", field="--tolerance")
    ia, ib = _index(doc_a), _index(doc_b)
    out = []
    for key in set(ia) | set(ib):
        a, b = ia.get(key), ib.get(key)
        if a is None:
            assert b is not None
            kind = "new"
        elif b is None:
            kind = "gone"
        else:
            kind = _kind(a, b, tolerance_pct)
        ref = b or a or {}
        out.append(
            Change(
                node=key[0],
                check=key[1],
                metric=key[2],
                labels=key[3],
                unit=str(ref.get("unit") or ""),
                a=a["value"] if a else None,
                b=b["value"] if b else None,
                verdict_a=a["verdict"] if a else None,
                verdict_b=b["verdict"] if b else None,
                kind=kind,
            )
        )
    return sorted(out, key=lambda c: (KIND_ORDER[c.kind], c.node, c.check, c.metric, c.labels))


def summarise(changes: list[Change]) -> dict[str, int]:
    """Count of changes per kind (every kind present, zero when none)."""
    counts = Counter(c.kind for c in changes)
    return {k: counts.get(k, 0) for k in KIND_ORDER}


def _delta(c: Change) -> str:
    d = c.delta_pct
    return "-" if d is None else f"{d:+.1f} %"


def render_compare_html(
    changes: list[Change],
    doc_a: Mapping[str, Any],
    doc_b: Mapping[str, Any],
    show_same: bool = False,
    asbuilt: list[dict[str, Any]] | None = None,
) -> str:
    """A self-contained HTML page of the comparison (every string escaped); ``asbuilt``: the
    as-built changes (:func:`nvtest.analysis.asbuilt.compare_runs`; None: not compared)."""
    ra, rb = doc_a.get("run") or {}, doc_b.get("run") or {}
    counts = summarise(changes)
    rows = []
    for c in changes:
        if c.kind == "same" and not show_same:
            continue
        cells = [
            c.node,
            c.check,
            c.metric or "(item)",
            c.labels,
            f"{fmt_num(c.a)} {c.unit}".strip(),
            f"{fmt_num(c.b)} {c.unit}".strip(),
            _delta(c),
            f"{c.verdict_a or '-'} → {c.verdict_b or '-'}",
            c.kind,
        ]
        rows.append(f'<tr class="{escape(c.kind)}">' + "".join(f"<td>{escape(str(x))}</td>" for x in cells) + "</tr>")
    summary = " · ".join(f"{n} {escape(k)}" for k, n in counts.items())
    ab_rows = "".join(
        f'<tr class="{escape(str(c["kind"]))}">'
        + "".join(
            f"<td>{escape(str(c[k] if c[k] is not None else ''))}</td>"
            for k in ("node", "kind", "part", "field", "before", "now")
        )
        + "</tr>"
        for c in asbuilt or []
    )
    if asbuilt is None:
        ab_html = '<p class="muted">As built: not compared (a run without asbuilt.json).</p>'
    elif not asbuilt:
        ab_html = "<p>As built: no part swapped, no firmware moved, the same nodes.</p>"
    else:
        ab_html = (
            '<h2>As built</h2><table id="asbuilt-changes"><thead><tr><th>node</th><th>change</th><th>part</th>'
            f"<th>field</th><th>A</th><th>B</th></tr></thead><tbody>{ab_rows}</tbody></table>"
        )
    va = (doc_a.get("summary") or {}).get("verdict", "-")
    vb = (doc_b.get("summary") or {}).get("verdict", "-")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>nvtest compare {escape(str(ra.get("run_id")))} → {escape(str(rb.get("run_id")))}</title>
<style>
body {{ font-family: system-ui, "DejaVu Sans", sans-serif; margin: 1.5rem 2rem; color: #1f2328; }}
table {{ border-collapse: collapse; font-size: .88rem; }} th, td {{ border: 1px solid #d0d7de; padding: .25rem .5rem; text-align: left; }}
th {{ background: #f6f8fa; }} tr.worse td {{ background: #ffebe9; }} tr.better td {{ background: #dafbe1; }}
tr.gone td, tr.new td, tr.firmware td {{ background: #fff8c5; }} tr.swapped td, tr.disappeared td, tr.removed td {{ background: #ffebe9; }} .muted {{ color: #57606a; }}
</style></head><body>
<h1>nvtest: what changed</h1>
<p>A: run <b>{escape(str(ra.get("run_id")))}</b> ({escape(str(va))}) → B: run <b>{escape(str(rb.get("run_id")))}</b> ({escape(str(vb))})</p>
<p id="counts">{summary}</p>
<table id="changes"><thead><tr><th>node</th><th>check</th><th>metric</th><th>labels</th><th>A</th><th>B</th><th>Δ</th><th>verdict</th><th>change</th></tr></thead>
<tbody>
{chr(10).join(rows)}
</tbody></table>
<p class="muted">Better or worse by verdict first, then by the threshold's direction (min: higher is better; max: lower is better); within the tolerance counts as same.</p>
{ab_html}
</body></html>
"""
