"""A finished run against its nodes' history: what the report's "since the last run" shows,
and the write of the run into the history.

:func:`since_last_run` compares each node's results with its previous run (or sweep) in
the history and returns the ``history`` section of results.json::

    {"database": "sqlite:////home/op/.local/share/nvtest/history.sqlite",
     "cluster": "rack07", "cluster_source": "inventory",
     "nodes": {"gpu017": {"previous_run": "run:20250101-...", "previous_at": 1735689600.0,
                          "drained_before": {"at": 1735000000.0, "reason": "nvtest: ..."},
                          "checks": {"gemm": {"verdict_before": "pass", "verdict_now": "fail",
                                              "metrics": [{"name": "bf16_tflops", "labels": "dtype=bf16,gpu=0",
                                                           "unit": "TFLOP/s", "before": 731.0, "now": 612.0,
                                                           "delta_pct": -16.28}]}}}}}

``database`` is the history's URL as :attr:`HistoryStore.display_url` shows it (no
password); ``cluster`` the cluster whose records the run was compared with and is written
under (:func:`~nvtest.history.cluster.cluster_of_run`): a node is known by (cluster, node),
so another cluster's ``node1`` is never its previous run. A node with no earlier record is
absent from ``nodes``. :func:`record_run` does both steps
for ``finish_run``: annotate first (so the run is not its own "previous"), then write.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from nvtest.history.cluster import cluster_of_run
from nvtest.history.queries import previous_runs
from nvtest.history.store import HistoryStore, labels_key

__all__ = ["record_run", "run_key", "since_last_run"]


def run_key(doc: Mapping[str, Any]) -> str:
    """The history key of a results.json document: ``run:<run_id>``."""
    return f"run:{(doc.get('run') or {}).get('run_id')}"


def _check_delta(result: Mapping[str, Any], before: Mapping[str, Any] | None) -> dict[str, Any]:
    if before is None:
        return {"verdict_before": None, "verdict_now": result.get("verdict"), "metrics": []}
    prev = before.get("metrics") or {}
    rows = []
    for m in result.get("metrics") or []:
        key = (str(m.get("name")), labels_key(m.get("labels")))
        if key not in prev:
            continue
        old, _unit = prev[key]
        now = m.get("value")
        delta = None
        if isinstance(old, (int, float)) and isinstance(now, (int, float)) and old:
            delta = round((now - old) / abs(old) * 100.0, 2)
        rows.append(
            {"name": key[0], "labels": key[1], "unit": m.get("unit"), "before": old, "now": now, "delta_pct": delta}
        )
    return {"verdict_before": before.get("verdict"), "verdict_now": result.get("verdict"), "metrics": rows}


def since_last_run(store: HistoryStore, doc: Mapping[str, Any]) -> dict[str, Any]:
    """The ``history`` section of ``doc`` (see the module doc); reads, never writes."""
    run = doc.get("run") or {}
    started = float(run.get("started_at") or 0) or float("inf")
    per_node: dict[str, list[Mapping[str, Any]]] = {}
    for r in doc.get("results") or []:
        per_node.setdefault(str(r["node"]), []).append(r)
    nodes = sorted(set(per_node) | set(doc.get("nodes") or {}))
    cluster = cluster_of_run(run)
    prev = previous_runs(store, nodes, before=started, exclude_key=run_key(doc), cluster=cluster)
    out: dict[str, Any] = {}
    for node, p in prev.items():
        out[node] = {
            "previous_run": p.key,
            "previous_at": p.started_at,
            "drained_before": {"at": p.drained[0], "reason": p.drained[1]} if p.drained else None,
            "checks": {
                str(r["check"]): _check_delta(r, p.checks.get(str(r["check"])) if p.key else None)
                for r in per_node.get(node, [])
            },
        }
    return {
        "database": store.display_url,
        "cluster": cluster,
        "cluster_source": run.get("history_cluster_source") or ("stated" if "history_cluster" in run else "derived"),
        "nodes": out,
    }


def record_run(store: HistoryStore, doc: dict[str, Any], *, kind: str = "run") -> None:
    """Set ``doc["history"]`` from the history, then write ``doc`` into it (idempotent per run).

    Raises:
        HistoryError: the database could not be read or written.
    """
    try:
        doc["history"] = since_last_run(store, doc)
    except SQLAlchemyError as exc:
        raise store.failure(exc) from exc
    store.ingest_results(doc, kind=kind, key=run_key(doc))
