"""The report's "As built" section: the fleet's firmware drift, parts swapped since the previous
acceptance, and the command that writes each failed node's RMA bundle.

Reads results.json's ``asbuilt`` section only (written by ``finish_run``; the full records are
in asbuilt.json beside it). Compact for thousands of nodes: per (rack, SKU) only the nodes
whose versions differ from their SKU's majority, with only the differing fields.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

__all__ = ["asbuilt_view"]

#: Rows of the changes table and of the RMA list shown (the rest: asbuilt.json, results.csv).
MAX_CHANGES = 200
MAX_RMA = 200
#: Differing nodes listed per SKU (the rest: asbuilt.json's drift).
MAX_DRIFT_ROWS = 300


def asbuilt_view(doc: Mapping[str, Any]) -> dict[str, Any] | None:
    """What the section shows, or None when the run has no as-built record.

    ``{"nodes", "unreadable", "skus": [{"sku", "fields", "majority": [values], "cols" (the
    fields some node differs in), "col_majority", "rows": [{"rack", "node", "cells": [(value,
    differs)]}] (only differing nodes, by rack), "nodes", "differing", "more", "racks":
    [(rack, nodes, differing)]}], "changes": [...], "changes_more", "compared", "rma": [(node,
    verdict, command)], "rma_more"}``
    """
    ab = doc.get("asbuilt")
    if not isinstance(ab, Mapping):
        return None
    drift = ab.get("drift") or {}
    fields = list(drift.get("fields") or [])
    majority = drift.get("majority") or {}
    skus = []
    for sku in sorted(majority):
        maj = majority[sku] or {}
        mine = [g for g in drift.get("groups") or [] if (g.get("sku") or "") == sku]
        differ = {f for g in mine for r in g.get("rows") or [] for f in r["values"]}
        cols = [f for f in fields if f in differ]
        rows = [
            {
                "rack": g.get("rack") or "",
                "node": r["node"],
                "cells": [(r["values"].get(f, maj.get(f)), f in r["values"]) for f in cols],
            }
            for g in mine
            for r in g.get("rows") or []
        ]
        skus.append(
            {
                "sku": sku,
                "fields": [f for f in fields if f in maj],
                "majority": [maj[f] for f in fields if f in maj],
                "cols": cols,
                "col_majority": [maj[f] for f in cols],
                "rows": rows[:MAX_DRIFT_ROWS],
                "nodes": sum(int(g.get("nodes") or 0) for g in mine),
                "differing": sum(int(g.get("differing") or 0) for g in mine),
                "more": sum(int(g.get("more") or 0) for g in mine) + max(0, len(rows) - MAX_DRIFT_ROWS),
                "racks": [(g.get("rack") or "", g.get("nodes") or 0, g.get("differing") or 0) for g in mine],
            }
        )
    since = ab.get("since_last")
    changes = list((since or {}).get("changes") or [])
    run_id = str((doc.get("run") or {}).get("run_id") or "RUN_DIR")
    failed = sorted(
        (name, str(nd.get("verdict")))
        for name, nd in (doc.get("nodes") or {}).items()
        if nd.get("verdict") in ("fail", "error")
    )
    rma = [(n, v, f"nvtest rma {shlex.quote(run_id)} {shlex.quote(n)}") for n, v in failed[:MAX_RMA]]
    return {
        "file": ab.get("file") or "asbuilt.json",
        "nodes": ab.get("nodes") or 0,
        "unreadable": list(ab.get("unreadable") or []),
        "skus": skus,
        "compared": since is not None,
        "previous_runs": list((since or {}).get("previous_runs") or []),
        "changes": changes[:MAX_CHANGES],
        "changes_more": max(0, len(changes) - MAX_CHANGES),
        "rma": rma,
        "rma_more": max(0, len(failed) - MAX_RMA),
    }
