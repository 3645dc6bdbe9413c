"""The report's view of a results.json document: what every renderer shares.

:func:`build_view` reads a results.json document (``nvtest.results``, schema
version 1) and returns a :class:`ReportView`: the checks in suite order, the
node list with racks and verdicts, per-check metric series for the charts, the
failures with their diagnoses, and every evidence link. It tolerates fields
that older or newer runs lack (``fleet``, ``diagnosis``, ``down_reason``,
``run.drained``, ``run.warnings``) and never touches a node or a file.
"""

from __future__ import annotations

import datetime as dt
import functools
import math
import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from nvtest.verdict import Verdict, rank_of, worst_of

__all__ = [
    "VERDICTS",
    "collapse",
    "rack_sku_rows",
    "CheckView",
    "MetricSeries",
    "ReportView",
    "build_view",
    "fmt_num",
    "fmt_time",
    "fmt_duration",
    "labels_text",
    "safe_log_link",
    "threshold_text",
]

#: Verdicts in display order (:class:`nvtest.verdict.Verdict`'s).
VERDICTS = tuple(v.value for v in Verdict)
_PLAIN_PATH = re.compile(r"[A-Za-z0-9_.~-][A-Za-z0-9_.~/-]*")


def safe_log_link(path: str | None) -> str | None:
    """A URL-quoted relative link for ``path`` if it lies inside the run directory, else None.

    Absolute paths, ``..`` segments, drive letters, URL schemes and empty
    segments are refused, so a link can only point below the report.
    """
    if not path or not isinstance(path, str):
        return None
    if _PLAIN_PATH.fullmatch(path):  # the common case: nothing to quote
        return path if all(p not in ("", ".", "..") for p in path.split("/")) else None
    norm = path.replace("\\", "/")
    if norm.startswith("/") or any(ord(c) < 32 for c in norm):
        return None
    parts = norm.split("/")
    if ":" in parts[0] or any(p in ("", ".", "..") for p in parts):
        return None
    return "/".join(quote(p, safe="") for p in parts)


def fmt_num(x: Any) -> str:
    """Four significant digits for floats (``5.977``), ``-`` for None, str otherwise."""
    if x is None:
        return "-"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, float):
        if math.isnan(x):
            return "NaN"
        return f"{x:.4g}"
    return str(x)


def fmt_time(ts: float | None) -> str:
    """Epoch seconds as ``YYYY-mm-dd HH:MM:SS UTC``; ``-`` when unknown."""
    if not ts:
        return "-"
    return dt.datetime.fromtimestamp(float(ts), tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def fmt_duration(seconds: float | None) -> str:
    """``1 h 02 min``, ``3 min 05 s`` or ``12.3 s``; ``-`` when unknown."""
    if seconds is None:
        return "-"
    s = float(seconds)
    if s < 60:
        return f"{s:.1f} s"
    m, sec = divmod(int(round(s)), 60)
    if m < 60:
        return f"{m} min {sec:02d} s"
    h, m = divmod(m, 60)
    return f"{h} h {m:02d} min"


def labels_text(labels: Mapping[str, Any] | None) -> str:
    """``gpu=0 dtype=bf16`` (empty for no labels)."""
    return " ".join(f"{k}={v}" for k, v in (labels or {}).items())


def threshold_text(t: Mapping[str, Any] | None) -> str:
    """``≥ 431 GB/s (warn < 450)`` style text of a threshold; ``-`` when None."""
    if not t:
        return "-"
    key = (t.get("min"), t.get("max"), t.get("warn_min"), t.get("warn_max"), t.get("unit") or "")
    try:
        return _threshold_text(*key)
    except TypeError:  # an unhashable value: format it uncached
        return _threshold_text.__wrapped__(*key)


@functools.lru_cache(maxsize=4096)
def _threshold_text(lo: Any, hi: Any, warn_lo: Any, warn_hi: Any, unit: str) -> str:
    t = {"min": lo, "max": hi, "warn_min": warn_lo, "warn_max": warn_hi}
    parts = []
    if t.get("min") is not None:
        parts.append(f"≥ {fmt_num(t['min'])}")
    if t.get("max") is not None:
        parts.append(f"≤ {fmt_num(t['max'])}")
    text = " and ".join(parts) or "no limit"
    if unit and parts:
        text += f" {unit}"
    warn = []
    if t.get("warn_min") is not None:
        warn.append(f"< {fmt_num(t['warn_min'])}")
    if t.get("warn_max") is not None:
        warn.append(f"> {fmt_num(t['warn_max'])}")
    if warn:
        text += f" (warn {' or '.join(warn)})"
    return text


@dataclass
class MetricSeries:
    """One metric of one check across the fleet, for a chart and a summary row.

    ``points`` are ``(node_index, value, verdict, outlier, node, labels)``;
    node_index is the node's position in :attr:`ReportView.node_names`.
    """

    check: str
    name: str
    unit: str
    threshold: dict[str, Any] | None = None
    points: list[tuple[int, float, str, bool, str, str]] = field(default_factory=list)
    median: float | None = None
    counts: Counter[str] = field(default_factory=Counter)
    missing: int = 0

    @property
    def values(self) -> list[float]:
        return [p[1] for p in self.points]

    @property
    def lo(self) -> float | None:
        return min(self.values) if self.points else None

    @property
    def hi(self) -> float | None:
        return max(self.values) if self.points else None

    @property
    def outliers(self) -> int:
        return sum(1 for p in self.points if p[3])


@dataclass
class CheckView:
    """One check: its metadata, its items, its metric series and its bad items."""

    name: str
    title: str
    area: str = ""
    description: str = ""
    counts: Counter[str] = field(default_factory=Counter)
    series: list[MetricSeries] = field(default_factory=list)
    bad: list[dict[str, Any]] = field(default_factory=list)
    skips: list[tuple[str, list[str]]] = field(default_factory=list)
    environments: list[tuple[str, list[str]]] = field(default_factory=list)


@dataclass
class ReportView:
    """Everything the renderers need, derived from one results.json document."""

    doc: dict[str, Any]
    run: dict[str, Any]
    summary: dict[str, Any]
    checks: list[CheckView]
    node_names: list[str]
    nodes: dict[str, dict[str, Any]]
    racks: list[str]
    matrix: dict[str, dict[str, dict[str, Any]]]
    diagnoses: list[dict[str, Any]]
    failures: list[dict[str, Any]]
    evidence: dict[str, list[tuple[str, str]]]
    skus: dict[str, Any]
    warnings: list[str]
    drained: dict[str, str]
    down: dict[str, str]
    #: node -> why ``--drain-failed`` did not drain it (``run.not_drained``)
    not_drained: dict[str, str] = field(default_factory=dict)

    @property
    def node_counts(self) -> dict[str, int]:
        counts = {v: 0 for v in VERDICTS}
        counts.update({k: int(v) for k, v in (self.summary.get("nodes") or {}).items()})
        return counts


def node_rack(node: Mapping[str, Any]) -> str:
    """The node's ``rack`` tag (from the inventory's settings), or empty."""
    tags = (node.get("settings") or {}).get("tags") or node.get("tags") or {}
    return str(tags.get("rack", "")) if isinstance(tags, Mapping) else ""


def node_tags(node: Mapping[str, Any]) -> dict[str, str]:
    """All the node's tags as strings."""
    tags = (node.get("settings") or {}).get("tags") or node.get("tags") or {}
    return {str(k): str(v) for k, v in tags.items()} if isinstance(tags, Mapping) else {}


def _robust_outliers(values: list[float], z: float = 3.5) -> tuple[float | None, list[bool]]:
    """Median and a modified-z outlier flag per value (Iglewicz and Hoaglin, |0.6745 d / MAD| > 3.5)."""
    if not values:
        return None, []
    med = statistics.median(values)
    mad = statistics.median(abs(v - med) for v in values)
    if mad == 0:
        return med, [False] * len(values)
    return med, [abs(0.6745 * (v - med) / mad) > z for v in values]


def environment_text(env: Mapping[str, Any]) -> str:
    """One line for a result's ``details.environment`` (see nvtest.session.environment)."""
    variables = env.get("variables") or {}
    vs = ", ".join(
        f"{k}={v.get('value')}{' (harness)' if v.get('source') == 'harness' else ''}"
        for k, v in sorted(variables.items())
    )
    boot = env.get("bootstrap") or {}
    boot_txt = "; ".join(f"{k}={v}" if k != "default" else str(v) for k, v in boot.items())
    return (
        f"variables: {vs or 'none set'} · topology file: {env.get('topology_file') or 'none'} · "
        f"CPUs {env.get('cpu_affinity') or '?'}, NUMA nodes {env.get('numa_nodes') or '?'} · "
        f"bootstrap: {boot_txt or '?'}"
    )


def environment_groups(items: Iterable[Mapping[str, Any]]) -> list[tuple[str, list[str]]]:
    """The distinct effective environments of a check's results, each with its nodes (most first)."""
    groups: dict[str, list[str]] = defaultdict(list)
    for r in items:
        env = (r.get("details") or {}).get("environment")
        if isinstance(env, Mapping):
            groups[environment_text(env)].append(str(r["node"]))
    return sorted(((t, sorted(ns)) for t, ns in groups.items()), key=lambda kv: -len(kv[1]))


def _checks_in_order(doc: Mapping[str, Any]) -> list[CheckView]:
    out: list[CheckView] = []
    seen: set[str] = set()
    for name, c in (doc.get("checks") or {}).items():
        out.append(
            CheckView(
                name=str(name),
                title=str(c.get("title") or name),
                area=str(c.get("area") or ""),
                description=" ".join(str(c.get("description") or "").split()),
            )
        )
        seen.add(str(name))
    for r in doc.get("results") or []:
        if r["check"] not in seen:
            seen.add(r["check"])
            out.append(CheckView(name=r["check"], title=r["check"]))
    return out


def _series_of(check: str, items: Iterable[Mapping[str, Any]], index: Mapping[str, int]) -> list[MetricSeries]:
    series: dict[str, MetricSeries] = {}
    fleet_medians: dict[str, list[float]] = defaultdict(list)
    for r in items:
        for m in r.get("metrics") or []:
            s = series.get(m["name"])
            if s is None:
                s = series[m["name"]] = MetricSeries(check=check, name=m["name"], unit=str(m.get("unit") or ""))
            if s.threshold is None and m.get("threshold"):
                s.threshold = dict(m["threshold"])
            s.counts[m.get("verdict", "pass")] += 1
            v = m.get("value")
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
                s.missing += 1
                continue
            fleet = m.get("fleet") or {}
            if isinstance(fleet.get("median"), (int, float)):
                fleet_medians[m["name"]].append(float(fleet["median"]))
            outlier = bool(fleet.get("outlier")) if "outlier" in fleet else None
            s.points.append(
                (
                    index.get(r["node"], 0),
                    float(v),
                    str(m.get("verdict", "pass")),
                    outlier,
                    r["node"],
                    labels_text(m.get("labels")),
                )  # type: ignore[arg-type]
            )
    for name, s in series.items():
        own_med, flags = _robust_outliers(s.values)
        given = fleet_medians.get(name)
        s.median = statistics.median(given) if given else own_med
        s.points = [
            (i, v, verdict, flag if given_flag is None else bool(given_flag), node, lab)
            for (i, v, verdict, given_flag, node, lab), flag in zip(s.points, flags, strict=True)
        ]
    return list(series.values())


def build_view(doc: Mapping[str, Any]) -> ReportView:
    """Derive the :class:`ReportView` of a results.json document (schema version 1)."""
    docd = dict(doc)
    run = dict(docd.get("run") or {})
    results = list(docd.get("results") or [])
    nodes: dict[str, dict[str, Any]] = {str(k): dict(v or {}) for k, v in (docd.get("nodes") or {}).items()}
    for r in results:
        nodes.setdefault(r["node"], {"name": r["node"]})
    node_names = sorted(nodes)
    index = {n: i for i, n in enumerate(node_names)}
    checks = _checks_in_order(docd)
    by_check: dict[str, list[dict[str, Any]]] = defaultdict(list)
    matrix: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for r in results:
        by_check[r["check"]].append(r)
        matrix[r["node"]][r["check"]] = r
    for n, nd in nodes.items():
        if not nd.get("verdict"):
            worst = worst_of(matrix[n][c]["verdict"] for c in matrix[n])
            nd["verdict"] = "error" if nd.get("down_reason") else worst
    diagnoses: list[dict[str, Any]] = []
    failures: list[dict[str, Any]] = []
    for c in checks:
        items = by_check.get(c.name, [])
        c.counts = Counter(r["verdict"] for r in items)
        c.series = _series_of(c.name, items, index)
        c.bad = sorted(
            (r for r in items if r["verdict"] in ("fail", "error", "warn")),
            key=lambda r: (-rank_of(r["verdict"]), r["node"]),
        )
        skip_groups: dict[str, list[str]] = defaultdict(list)
        for r in items:
            if r["verdict"] == "skip":
                skip_groups[str(r.get("reason") or "skipped")].append(r["node"])
        c.skips = sorted(skip_groups.items(), key=lambda kv: -len(kv[1]))
        c.environments = environment_groups(items)
        failures.extend(r for r in c.bad if r["verdict"] in ("fail", "error"))
    groups: dict[tuple[str, str, str], dict[str, Any]] = {}
    for r in results:
        diag = r.get("diagnosis")
        if not diag or r["verdict"] not in ("fail", "error", "warn"):
            continue
        key = (str(diag.get("cause", "")), str(diag.get("action", "")), str(diag.get("class", "")))
        g = groups.setdefault(
            key,
            {
                "cause": key[0],
                "action": key[1],
                "class": key[2],
                "verdict": r["verdict"],
                "checks": [],
                "nodes": [],
            },
        )
        if r["check"] not in g["checks"]:
            g["checks"].append(r["check"])
        if r["node"] not in g["nodes"]:
            g["nodes"].append(r["node"])
        if rank_of(r["verdict"]) > rank_of(g["verdict"]):
            g["verdict"] = r["verdict"]
    for g in groups.values():
        g["check"] = g["checks"][0]
        g["nodes"].sort()
    diagnoses = sorted(groups.values(), key=lambda g: (-rank_of(g["verdict"]), -len(g["nodes"]), g["check"]))
    evidence: dict[str, list[tuple[str, str]]] = {}
    for n in node_names:
        links: dict[str, str] = {}
        inv_link = safe_log_link(nodes[n].get("inventory_log"))
        if inv_link:
            links[inv_link] = "inventory"
        for c in checks:
            r = matrix[n].get(c.name)
            link = safe_log_link(r.get("log")) if r else None
            if link and link not in links:
                links[link] = c.name
        evidence[n] = [(label, link) for link, label in links.items()]
    racks = sorted({node_rack(nodes[n]) for n in node_names} - {""})
    down = {n: str(nd["down_reason"]) for n, nd in nodes.items() if nd.get("down_reason")}
    return ReportView(
        doc=docd,
        run=run,
        summary=dict(docd.get("summary") or {}),
        checks=checks,
        node_names=node_names,
        nodes=nodes,
        racks=racks,
        matrix=matrix,
        diagnoses=diagnoses,
        failures=failures,
        evidence=evidence,
        skus=dict(docd.get("skus") or {}),
        warnings=[str(w) for w in run.get("warnings") or []],
        drained={str(k): str(v) for k, v in (run.get("drained") or {}).items()},
        down=down,
        not_drained={str(k): str(v) for k, v in (run.get("not_drained") or {}).items()},
    )


def collapse(items: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Results with the same check, verdict, reason and diagnosis as one row naming their nodes.

    Returns ``[{check, verdict, reason, diagnosis, nodes, log, cause}]`` in the order first seen
    (``cause``: the results' cause key, None where they have none);
    ``log`` is the item's raw log when the row has one node (else None: each node's log is
    in the matrix and the raw logs). 500 unreachable nodes with one reason are one row.
    """
    rows: dict[tuple[str, ...], dict[str, Any]] = {}
    for r in items:
        diag = r.get("diagnosis") or {}
        key = (
            str(r["check"]),
            str(r["verdict"]),
            " ".join(str(r.get("reason") or "").split()),
            str(diag.get("cause", "")),
            str(diag.get("action", "")),
            str(r.get("cause") or ""),
        )
        row = rows.get(key)
        if row is None:
            row = rows[key] = {
                "check": key[0],
                "verdict": key[1],
                "reason": r.get("reason") or "",
                "diagnosis": r.get("diagnosis") or None,
                "nodes": [],
                "log": r.get("log"),
                "cause": r.get("cause") or None,
            }
        row["nodes"].append(str(r["node"]))
    for row in rows.values():
        if len(row["nodes"]) > 1:
            row["log"] = None
    return list(rows.values())


def rack_sku_rows(view: ReportView) -> list[dict[str, Any]]:
    """The verdict per (rack, SKU): ``[{rack, sku, nodes, counts, verdict, bad}]``, by rack then SKU.

    ``counts``: nodes per verdict; ``verdict``: the worst; ``bad``: the nodes that failed
    or errored (all of them, by name).
    """
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for n in view.node_names:
        nd = view.nodes[n]
        key = (node_rack(nd), str(nd.get("sku") or ""))
        g = groups.setdefault(key, {"rack": key[0], "sku": key[1], "nodes": 0, "counts": Counter(), "bad": []})
        verdict = str(nd.get("verdict") or "skip")
        g["nodes"] += 1
        g["counts"][verdict] += 1
        if verdict in ("fail", "error"):
            g["bad"].append(n)
    for g in groups.values():
        g["verdict"] = worst_of(g["counts"])
    return [groups[k] for k in sorted(groups, key=lambda k: (k[0] == "", k[0], k[1]))]
