"""``--drain-failed``: drain the nodes that failed a run, under Slurm (opt-in).

Reason format: ``nvtest <run-id>: <check> <short reason>`` (Slurm keeps it in
``sinfo -R``). Which nodes: :func:`nvtest.analysis.acting.drain_plan` decides, per node
of the run: only a failure proven on the node is drained for; never an ``error`` or
``unknown`` (not measured), never a check the run flagged systemic (every node of the
SKU failing it) or whose diagnosis puts the cause outside the node (shared storage); and
never more than ``--drain-max-fraction`` of the run's nodes (25 % by default, at least one
node) in one run. Every decision on a node with a failure or an error, drained or not
and why, goes to results.jsonl
(``drain`` and ``drain_skipped`` lines), hence results.json (``run.drained``,
``run.not_drained``) and the report. Nothing else in Slurm changes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nvtest.analysis.acting import DRAIN_MAX_FRACTION, NOTHING_FAILED, DrainDecision, drain_plan
from nvtest.results import load_results, read_events
from nvtest.text import one_line

__all__ = ["drain_failed_nodes", "drain_reason"]


def drain_reason(run_id: str, check: str, reason: str, limit: int = 120) -> str:
    """The drain reason for a node: ``nvtest <run-id>: <check> <short reason>``."""
    return one_line(f"nvtest {run_id}: {check} {reason}".replace('"', "'"), limit)


def drain_failed_nodes(
    run_dir: Path, backend_options: dict[str, Any], *, max_fraction: float = DRAIN_MAX_FRACTION
) -> list[DrainDecision]:
    """Drain the nodes :func:`~nvtest.analysis.acting.drain_plan` allows; record every
    node's decision in results.json and the report.

    Returns the decisions, one per node (``why`` for a drained node is the reason given to
    Slurm). A node Slurm refused to drain is recorded as not drained, with scontrol's words.

    Raises:
        ValueError: ``max_fraction`` not in (0, 1].
    """
    from nvtest.analysis.finish import finish_run
    from nvtest.errors import TransportError
    from nvtest.results import ResultStore
    from nvtest.transports.slurm import SlurmTransport

    doc = load_results(run_dir)
    run_id = str(doc["run"].get("run_id"))
    plan = drain_plan(doc, max_fraction)
    opts = {k: v for k, v in backend_options.items() if k in ("partition",)}
    already = {
        e.get("node") for e in read_events(run_dir / "results.jsonl") if e.get("kind") in ("drain", "drain_skipped")
    }
    out: list[DrainDecision] = []
    transport = SlurmTransport(allocate=False, **opts) if any(d.drain for d in plan) else None
    store = ResultStore(run_dir)
    try:
        for d in plan:
            if d.node in already:
                continue
            if d.drain and transport is not None:
                reason = drain_reason(run_id, d.check or "?", d.reason or "failed")
                try:
                    transport.drain(d.node, reason)
                except TransportError as exc:
                    d = DrainDecision(d.node, False, f"not drained: scontrol refused: {exc}", d.check, d.reason)
                else:
                    d = DrainDecision(d.node, True, reason, d.check, d.reason)
            if d.drain:
                store.append("drain", {"node": d.node, "reason": d.why})
            elif d.why != NOTHING_FAILED:  # a node that passed is not a drain candidate
                store.append("drain_skipped", {"node": d.node, "why": d.why})
            out.append(d)
    finally:
        store.close()
        if transport is not None:
            transport.close()
    if out:
        finish_run(run_dir)
    return out
