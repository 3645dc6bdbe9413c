"""Judging the checkpoint tier probe (``probes/ckpt_probe.py``) and the shared tier's aggregate.

Per node and tier: ``write_gbps`` and ``read_gbps`` (GB/s, 10^9 bytes/s),
``model_save_s`` / ``model_load_s`` (seconds, the smoke run's model and AdamW
state with torch.save/torch.load).  Aggregate over nodes writing at once::

    aggregate_gbps = sum(bytes of every node) / (latest end - earliest start) / 1e9
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from nvtest.checks.api import Judge, Probe, each_node, measure_probe

if TYPE_CHECKING:
    from nvtest.config.inventory import Node
    from nvtest.session.context import RunContext

__all__ = ["aggregate", "aggregate_of", "judge_reach", "judge_tier", "tier_entry"]


def tier_entry(doc: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ``kind: tier`` result of a ckpt probe document."""
    return next((r for r in doc.get("results", []) if r.get("kind") == "tier"), None)


def judge_reach(judge: Judge, doc: Mapping[str, Any]) -> bool:
    """The shared tier's path answered and took a write (True), else the item fails with the
    probe's words: missing (``not reachable: No such file or directory (not mounted?)``), not
    writable, or no answer within ``ckpt.shared_deadline_s`` at a named step (a hung mount)."""
    reach = next((r for r in doc.get("results", []) if r.get("kind") == "reach"), None)
    if reach is None:
        return True
    judge.detail("reach", {k: reach.get(k) for k in ("reachable", "writable", "step", "seconds", "reason")})
    if reach.get("reachable") and reach.get("writable") is not False:
        return True
    why = str(reach.get("reason"))
    hung = " (a hung mount? the kernel log's storage-client lines are in xid_scan)" if "no answer within" in why else ""
    judge.fail(f"shared filesystem {why}{hung}", "storage:unreachable")
    return False


def judge_tier(judge: Judge, doc: Mapping[str, Any]) -> dict[str, Any] | None:
    """Judge one node's tier figures; a failed checksum verification fails the item."""
    r = tier_entry(doc)
    if r is None:
        judge.fail("the probe reported no tier result")
        return None
    tier = r.get("tier", "?")
    judge("write_gbps", r.get("write_gbps"), "GB/s", tier=tier)
    judge("read_gbps", r.get("read_gbps"), "GB/s", tier=tier)
    if not r.get("verified"):
        judge.fail(
            f"checksum mismatch on read back from {r.get('path')}: wrote {r.get('checksum')}, "
            f"read {r.get('read_checksum')} ({r.get('read_bytes')} of {r.get('size_bytes')} bytes)"
        )
    model = next((m for m in doc.get("results", []) if m.get("kind") == "model_state"), None)
    if model and model.get("status") != "skip":
        judge("model_save_s", model.get("save_s"), "s", tier=tier)
        judge("model_load_s", model.get("load_s"), "s", tier=tier)
        if not model.get("verified"):
            judge.fail("model state read back differs from the one saved")
        judge.detail("model_state", {k: model.get(k) for k in ("bytes", "parameters", "save_s", "load_s")})
    judge.detail(
        "tier",
        {
            k: r.get(k)
            for k in (
                "tier",
                "path",
                "mount_point",
                "fs_type",
                "size_bytes",
                "write_s",
                "fsync_s",
                "read_s",
                "cache_dropped",
                "checksum",
            )
        },
    )
    return r


def aggregate_of(entries: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Aggregate write/read GB/s of tier entries measured at the same time."""
    if not entries:
        return {"nodes": 0, "write_gbps": None, "read_gbps": None}
    total = sum(int(e["size_bytes"]) for e in entries)
    w_span = max(e["t_write_end"] for e in entries) - min(e["t_write_start"] for e in entries)
    r_span = max(e["t_read_end"] for e in entries) - min(e["t_read_start"] for e in entries)
    return {
        "nodes": len(entries),
        "bytes": total,
        "write_span_s": w_span,
        "read_span_s": r_span,
        "write_gbps": total / w_span / 1e9 if w_span > 0 else None,
        "read_gbps": total / r_span / 1e9 if r_span > 0 else None,
        "formula": "sum(bytes) / (latest end - earliest start) / 1e9",
    }


def aggregate(ctx: RunContext, probe: Probe, nodes: Sequence[Node]) -> dict[str, Any]:
    """The aggregate over every node whose probe ran; a node whose probe failed, hung or left
    a process it could not kill is left out and named (``left_out``), and fails only its own
    item (:func:`~nvtest.checks.api.each_node`)."""
    got, missing = each_node(nodes, lambda n: tier_entry(measure_probe(ctx, probe, n, nodes)))
    entries = [e for e in got.values() if e is not None]
    return {**aggregate_of(entries), "left_out": [f"{n}: {why}" for n, why in missing.items()]}
