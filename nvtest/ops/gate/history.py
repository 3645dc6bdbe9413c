"""A gate document into the history: one run of kind ``gate``, a result per check, its
numbers, and the drain or resume it caused (``nvtest history NODE`` shows them)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nvtest.history.target import resolve_target

__all__ = ["gate_rows", "record_gate"]


def gate_rows(doc: Mapping[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """(run, result rows, metric rows, event rows) of a gate document; the run's ``cluster``
    is the document's (the node is known by (cluster, node))."""
    from nvtest.history.store import labels_key

    node, start = str(doc["node"]), float(doc["started_at"])
    run = {
        "cluster": str(doc.get("cluster") or ""),
        "kind": "gate", "started_at": start, "ended_at": start + float(doc.get("duration_s") or 0),
        "host": node, "suite": f"gate:{doc.get('mode')}", "verdict": doc.get("verdict"),
        "details": {"duration_s": doc.get("duration_s"), "sku": (doc.get("sku") or {}).get("name"),
                    "mode": doc.get("mode"), "job_id": doc.get("job_id"), "budget_s": doc.get("budget_s")},
    }  # fmt: skip
    results, metrics = [], []
    for c in doc.get("checks") or []:
        bad = next((d for d in c.get("decisions") or [] if d.get("next_step")), None)
        results.append({
            "node": node, "check_name": c["check"], "verdict": c["verdict"], "reason": (c.get("reason") or "")[:2000],
            "started_at": start, "action_class": (bad or {}).get("next_step", {}).get("class") if bad else None,
        })  # fmt: skip
        for m in c.get("metrics") or []:
            metrics.append({
                "node": node, "check_name": c["check"], "metric": m["name"], "labels": labels_key(m.get("labels")),
                "value": m.get("value"), "unit": m.get("unit"), "verdict": c["verdict"],
            })  # fmt: skip
    events = []
    for key in ("drain", "resume"):
        act = (doc.get("slurm") or {}).get(key)
        if act and act.get("action") in ("drain", "resume", "refused"):
            kind = act["action"] if act["action"] != "refused" else f"{key}_refused"
            events.append({"node": node, "at": start, "kind": kind, "reason": act.get("reason"), "source": f"gate:{doc.get('mode')}"})
    return run, results, metrics, events


def record_gate(doc: Mapping[str, Any], target: str | None, *, cleared: bool = False) -> dict[str, Any] | None:
    """Write ``doc`` into the history at ``target`` (None: the default); its database, or None
    when history is off.

    Raises:
        HistoryError: the database could not be written. ConfigError: a bad ``--history``.
    """
    url = resolve_target(target)
    if url is None:
        return None
    from nvtest.history.store import HistoryStore

    store = HistoryStore(url)
    try:
        run, results, metrics, events = gate_rows(doc)
        if cleared:
            events.append({"node": str(doc["node"]), "at": float(doc["started_at"]), "kind": "xid_cleared",
                           "reason": "fatal GPU events cleared by an operator (--clear-xids)", "source": "gate"})  # fmt: skip
        who = f"{run['cluster']}/{doc['node']}" if run["cluster"] else str(doc["node"])
        store.write_run(f"gate:{who}:{float(doc['started_at']):.6f}", run, results, metrics, events)
        return {"database": store.display_url}
    finally:
        store.close()
