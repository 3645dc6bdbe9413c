"""``--drain-failed``: drain the nodes that failed a run, under Slurm (opt-in).

Reason format: ``nvtest <run-id>: <check> <short reason>`` (Slurm keeps it in
``sinfo -R``). Only failed nodes are drained; nothing else in Slurm changes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nvtest.results import load_results, read_events
from nvtest.text import one_line

__all__ = ["drain_failed_nodes", "drain_reason"]


def drain_reason(run_id: str, check: str, reason: str, limit: int = 120) -> str:
    """The drain reason for a node: ``nvtest <run-id>: <check> <short reason>``."""
    return one_line(f"nvtest {run_id}: {check} {reason}".replace('"', "'"), limit)


def drain_failed_nodes(run_dir: Path, backend_options: dict[str, Any]) -> dict[str, str]:
    """Drain every node with a ``fail`` verdict; record them in results.json and the report.

    Returns node -> the reason given to Slurm.
    """
    from nvtest.analysis.finish import finish_run
    from nvtest.results import ResultStore
    from nvtest.transports.slurm import SlurmTransport

    doc = load_results(run_dir)
    run_id = str(doc["run"].get("run_id"))
    first_fail: dict[str, dict[str, Any]] = {}
    for r in doc["results"]:
        if r["verdict"] == "fail" and r["node"] not in first_fail:
            first_fail[r["node"]] = r
    drained: dict[str, str] = {}
    opts = {k: v for k, v in backend_options.items() if k in ("partition",)}
    transport = SlurmTransport(allocate=False, **opts)
    store = ResultStore(run_dir)
    already = {e.get("node") for e in read_events(run_dir / "results.jsonl") if e.get("kind") == "drain"}
    try:
        for node, r in sorted(first_fail.items()):
            if node in already:
                continue
            reason = drain_reason(run_id, r["check"], r.get("reason") or "failed")
            transport.drain(node, reason)
            drained[node] = reason
            store.append("drain", {"node": node, "reason": reason})
    finally:
        store.close()
        transport.close()
    if drained:
        finish_run(run_dir)
    return drained
