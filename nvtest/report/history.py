"""The report's "Since the last run" section: each node and check against the node's previous
run in the history (results.json's ``history`` section, written by ``finish_run``).

Reads the document only. A node whose previous run is unknown is counted as first seen; a
node drained before (by any nvtest run, gate or sweep) is listed with the drain's reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["HistoryRow", "HistoryView", "history_view"]

#: A metric is shown as changed from this many percent (either direction).
CHANGED_PCT = 5.0


@dataclass(frozen=True)
class HistoryRow:
    """One (node, check) against the node's previous run; ``changes``: metrics that moved
    by at least :data:`CHANGED_PCT` percent, as (name, labels, unit, before, now, delta_pct)."""

    node: str
    check: str
    verdict_before: str | None
    verdict_now: str | None
    changes: tuple[tuple[str, str, str | None, Any, Any, float | None], ...]
    previous_run: str | None
    previous_at: float | None

    @property
    def verdict_changed(self) -> bool:
        return self.verdict_before != self.verdict_now


@dataclass(frozen=True)
class HistoryView:
    """What the section shows: rows with a change, drained-before nodes, counts; the
    history (``database``, its URL without a password) and the ``cluster`` whose records the
    nodes were compared with ('' for a document from before clusters were kept)."""

    database: str
    rows: tuple[HistoryRow, ...]
    drained_before: tuple[tuple[str, float | None, str], ...]
    compared: int
    first_seen: int
    unchanged: int = 0
    notes: tuple[str, ...] = field(default_factory=tuple)
    cluster: str = ""


def _rows(node: str, entry: Mapping[str, Any]) -> tuple[list[HistoryRow], int]:
    rows, same = [], 0
    for check, c in sorted((entry.get("checks") or {}).items()):
        changes = tuple(
            (m["name"], m.get("labels") or "", m.get("unit"), m.get("before"), m.get("now"), m.get("delta_pct"))
            for m in c.get("metrics") or []
            if m.get("delta_pct") is not None and abs(m["delta_pct"]) >= CHANGED_PCT
        )
        row = HistoryRow(
            node,
            check,
            c.get("verdict_before"),
            c.get("verdict_now"),
            changes,
            entry.get("previous_run"),
            entry.get("previous_at"),
        )
        if row.verdict_changed or changes:
            rows.append(row)
        else:
            same += 1
    return rows, same


def history_view(doc: Mapping[str, Any]) -> HistoryView | None:
    """The section's view, or None when the run has no ``history`` section."""
    hist = doc.get("history")
    if not isinstance(hist, Mapping):
        return None
    nodes = hist.get("nodes") or {}
    all_nodes = set(doc.get("nodes") or {}) | {str(r["node"]) for r in doc.get("results") or []}
    rows: list[HistoryRow] = []
    drained: list[tuple[str, float | None, str]] = []
    unchanged = compared = 0
    for node in sorted(nodes):
        entry = nodes[node]
        if entry.get("previous_run"):
            compared += 1
            got, same = _rows(node, entry)
            rows += got
            unchanged += same
        d = entry.get("drained_before")
        if d:
            drained.append((node, d.get("at"), str(d.get("reason") or "")))
    first = len([n for n in all_nodes if not (nodes.get(n) or {}).get("previous_run")])
    rows.sort(key=lambda r: (not r.verdict_changed, r.node, r.check))
    return HistoryView(
        str(hist.get("database") or ""),
        tuple(rows),
        tuple(drained),
        compared,
        first,
        unchanged,
        cluster=str(hist.get("cluster") or ""),
    )
