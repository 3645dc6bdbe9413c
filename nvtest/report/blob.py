"""The JSON the page's script renders report.html's matrix, panels and long tables from.

Compact at fleet scale: what repeats across nodes is written once and referred to by
index. The shape (read by ``templates/report.js``; every key is always present):

- ``checks``: ``[{name, title}]`` in suite order (``ci`` is an index into it).
- ``T``: the shared table of repeated values (a host's CPU/OS/driver line, a GPU row
  without its serial and UUID, a NIC row, a diagnosis, a version pair, a note).
- ``thresholds``: ``[[text, source, origin]]``.
- ``keys``: per check, its metric keys ``[name, labels, unit, threshold index or -1,
  fleet median or null]``; a metric of an item names its key.
- ``nodes``: ``[{n, v, r, s, t, c, d, dr, ld}]``: name, verdict, rack, SKU, tags, one
  verdict letter per check (``p w f e s``, ``-`` none), unreachable and drained reasons,
  the node's log directory as a link (and ``dir``, its name as written, where that differs).
- ``items``: per node (in ``nodes`` order), per check: 0 (no item) or
  ``{t, m, r?, l?, d?}``: duration s, metrics, reason (not for a pass), log link (absent:
  ``<ld>/<check>.log``; ``""``: none), diagnosis (index into ``T``: [cause, action, class]).
  A metric is ``[key, value, robust_z]`` (a pass, no outlier) or ``[key, value, robust_z,
  verdict, outlier 0/1, reason]``; its fleet delta is ``(value - median) / median``.
- ``inventory``: per node ``{h, g, n, o, no, sm, ga, l}``: host (index into ``T``: cpu,
  cores, sockets, memory GiB, OS, kernel, driver, CUDA), GPUs ``[[T index, serial, uuid]]``
  (the row: index, name, serial, uuid, bus id, memory MiB, VBIOS, ECC, PCIe text,
  downgraded, MIG), NICs and other versions (T indices), notes, SKU match, GPU-absent
  reason, inventory log link.

Measured values are carried unrounded (NaN and infinities as text); fleet statistics to
about six significant digits.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import Any

from nvtest.report.model import ReportView, node_rack, node_tags, safe_log_link, threshold_text

__all__ = ["data_blob"]

_INF = float("inf")
_THRESHOLD_KEYS = ("min", "max", "warn_min", "warn_max", "unit", "source", "origin")
_CODE = {"pass": "p", "warn": "w", "fail": "f", "error": "e", "skip": "s"}
_COVERED = frozenset(
    {
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


class _Table:
    """Values written once, referred to by index (equal JSON, equal index)."""

    def __init__(self) -> None:
        self.values: list[Any] = []
        self._index: dict[str, int] = {}

    def __call__(self, value: Any) -> int:
        key = repr(value)  # tells 1 from True and 1.0, as JSON would
        i = self._index.get(key)
        if i is None:
            i = self._index[key] = len(self.values)
            self.values.append(value)
        return i


def _downgraded(g: Mapping[str, Any]) -> bool:
    pairs = (("pcie_gen_current", "pcie_gen_max"), ("pcie_width_current", "pcie_width_max"))
    return any(isinstance(g.get(a), int) and isinstance(g.get(b), int) and g[a] < g[b] for a, b in pairs)


def _nics(inv: Mapping[str, Any]) -> list[list[Any]]:
    nics = [
        [
            n.get("name") or n.get("slot"),
            n.get("model") or n.get("device") or n.get("ca_type"),
            n.get("firmware") or n.get("fw_ver") or n.get("fw_version"),
            n.get("state") or n.get("rate") or n.get("driver"),
        ]
        for n in inv.get("nics") or inv.get("hcas") or []
        if isinstance(n, Mapping)
    ]
    if nics:
        return nics
    for p in inv.get("pci") or []:
        cid, cname = str(p.get("class_id") or ""), str(p.get("class_name"))
        if cid.startswith("02") or "Ethernet" in cname or "Infiniband" in cname:
            nics.append([p.get("slot"), f"{p.get('vendor', '')} {p.get('device', '')}".strip(), None, p.get("driver")])
    return nics


def _inventory(nd: Mapping[str, Any], T: _Table) -> dict[str, Any]:
    """One node's inventory, its repeated parts in ``T``."""
    inv = nd.get("inventory") or {}
    gpus = []
    for g in inv.get("gpus") or []:
        row = [
            g.get("index"),
            g.get("name"),
            None,
            None,
            g.get("pci_bus_id"),
            g.get("memory_mib"),
            g.get("vbios"),
            g.get("ecc_mode"),
            f"Gen{g.get('pcie_gen_current') or '?'}/Gen{g.get('pcie_gen_max') or '?'} "
            f"x{g.get('pcie_width_current') or '?'}/x{g.get('pcie_width_max') or '?'}",
            _downgraded(g),
            g.get("mig_mode"),
        ]
        gpus.append([T(row), g.get("serial"), g.get("uuid")])
    other = [
        [k, str(v)]
        for k, v in inv.items()
        if k not in _COVERED and isinstance(v, (str, int, float)) and not isinstance(v, bool)
    ]
    for k, v in inv.items():
        if k not in _COVERED and isinstance(v, Mapping):
            other.extend([f"{k}.{kk}", str(vv)] for kk, vv in v.items() if isinstance(vv, (str, int, float)))
    mem = inv.get("memory_total_kib")
    host = [
        inv.get("cpu_model"),
        inv.get("cores"),
        inv.get("sockets"),
        round(mem / 1048576, 1) if isinstance(mem, (int, float)) else None,
        inv.get("os"),
        inv.get("kernel"),
        inv.get("driver_version"),
        inv.get("cuda_version"),
    ]
    out: dict[str, Any] = {"h": T(host), "g": gpus, "n": [T(x) for x in _nics(inv)], "o": [T(x) for x in other]}
    for key, value in (
        ("no", [str(x) for x in inv.get("notes") or []]),
        ("sm", [str(x) for x in nd.get("sku_match") or []]),
        ("ga", inv.get("gpu_absent_reason")),
        ("l", safe_log_link(nd.get("inventory_log"))),
    ):
        if value:
            out[key] = T(value) if key in ("sm", "ga") else value
    return out


class _Metrics:
    """Metric keys per check and thresholds, shared by every node's items."""

    def __init__(self, checks: int) -> None:
        self.keys: list[_Table] = [_Table() for _ in range(checks)]
        self.thresholds = _Table()
        self._seen: dict[tuple[str, ...], int] = {}
        self._by_id: dict[int, int] = {}
        self._alive: list[Any] = []

    def threshold(self, t: Mapping[str, Any] | None) -> int:
        if not t:
            return -1
        i = self._by_id.get(id(t))  # the same dict (a document built in memory) is common
        if i is not None:
            return i
        raw = tuple(map(str, (t.get(k) for k in _THRESHOLD_KEYS)))
        i = self._seen.get(raw)
        if i is None:
            row = [threshold_text(t), str(t.get("source") or ""), str(t.get("origin") or "")]
            i = self._seen[raw] = self.thresholds(row)
        self._by_id[id(t)] = i
        self._alive.append(t)  # its id stays its own while this table lives
        return i

    def encode(self, ci: int, m: Mapping[str, Any]) -> list[Any]:
        f = m.get("fleet") or None
        labels = m.get("labels")
        key = [
            m.get("name"),
            " ".join(f"{k}={v}" for k, v in labels.items()) if labels else "",
            m.get("unit") or "",
            self.threshold(m.get("threshold")),
            _finite(f.get("median")) if f else None,
        ]
        row = [self.keys[ci](key), _raw(m.get("value")), _finite(f.get("robust_z")) if f else None]
        verdict, outlier = m.get("verdict"), bool(f and f.get("outlier"))
        if verdict != "pass" or outlier:
            row += [verdict, int(outlier), "" if verdict == "pass" else m.get("reason") or ""]
        return row


def _item(r: Mapping[str, Any], ci: int, check: str, ld: str, M: _Metrics, T: _Table) -> dict[str, Any]:
    it: dict[str, Any] = {"t": r.get("duration_s"), "m": [M.encode(ci, m) for m in r.get("metrics") or []]}
    if r.get("verdict") != "pass" and r.get("reason"):
        it["r"] = r["reason"]
    link = safe_log_link(r.get("log")) or ""
    if not ld or link != f"{ld}/{check}.log":
        it["l"] = link
    diag = r.get("diagnosis")
    if diag:
        it["d"] = T([str(diag.get("cause", "")), str(diag.get("action", "")), str(diag.get("class", ""))])
    return it


def _log_dir(nd: Mapping[str, Any], row: Mapping[str, Mapping[str, Any]]) -> str:
    """The node's log directory as a safe relative link ('' when unknown)."""
    given = safe_log_link(nd.get("log_dir"))
    if given:
        return given.rstrip("/")
    for r in row.values():
        link = safe_log_link(r.get("log"))
        if link and "/" in link:
            return posixpath.dirname(link)
    return ""


def data_blob(view: ReportView) -> dict[str, Any]:
    """The JSON the page's script renders the matrix, panels and long tables from (shape:
    the module's docstring)."""
    checks = [c.name for c in view.checks]
    T, M = _Table(), _Metrics(len(checks))
    nodes, items, inventory = [], [], []
    for n in view.node_names:
        nd = view.nodes[n]
        row = view.matrix.get(n, {})
        ld = _log_dir(nd, row)
        nodes.append(
            {
                "n": n,
                "v": nd.get("verdict") or "skip",
                "r": node_rack(nd),
                "s": nd.get("sku") or "",
                "t": " ".join(f"{k}={v}" for k, v in node_tags(nd).items()),
                "c": "".join(_CODE.get(row[c]["verdict"], "s") if c in row else "-" for c in checks),
                "d": nd.get("down_reason") or "",
                "dr": view.drained.get(n, ""),
                "ld": ld,
            }
        )
        shown = str(nd.get("log_dir") or "").rstrip("/")
        if shown and shown != ld:  # the directory's own name where its link is quoted
            nodes[-1]["dir"] = shown
        inventory.append(_inventory(nd, T))
        items.append([_item(row[c], ci, c, ld, M, T) if c in row else 0 for ci, c in enumerate(checks)])
    return {
        "checks": [{"name": c.name, "title": c.title} for c in view.checks],
        "T": T.values,
        "thresholds": M.thresholds.values,
        "keys": [k.values for k in M.keys],
        "nodes": nodes,
        "items": items,
        "inventory": inventory,
    }
