"""The sweep's circuit breaker: when too many of the swept nodes fail the same check the same
way, nvtest suspects itself (its environment, a shipped file, a threshold) before the
hardware, and drains nothing.

:func:`circuit_breaker` groups, per check, the failing nodes by *how* they fail: the first
failing metric's value (similar when within ``similar_pct`` percent of the group's median),
else the reason with its numbers and node names blanked. The largest group of one check
trips the breaker when it is more than ``share`` of the swept nodes (and at least
``min_nodes`` nodes were swept: one node failing is not a pattern). Pure: results.json
documents in, a :class:`BreakerVerdict` out.
"""

from __future__ import annotations

import re
import statistics
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["BreakerVerdict", "circuit_breaker", "failure_signature"]


@dataclass(frozen=True)
class BreakerVerdict:
    """Whether the breaker tripped, on which check, for which nodes, and why."""

    tripped: bool
    reason: str
    check: str | None = None
    nodes: tuple[str, ...] = ()
    share: float = 0.0
    swept: int = 0
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "tripped": self.tripped,
            "reason": self.reason,
            "check": self.check,
            "nodes": list(self.nodes),
            "share": round(self.share, 3),
            "swept": self.swept,
            "details": self.details,
        }


_NUM = re.compile(r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?", re.I)


def failure_signature(result: Mapping[str, Any], node: str) -> tuple[str, float | None]:
    """How one (check, node) failed: (metric name or normalised reason, the metric's value)."""
    for m in result.get("metrics") or []:
        if m.get("verdict") == "fail" and isinstance(m.get("value"), (int, float)):
            return f"metric {m['name']} [{m.get('unit') or ''}]", float(m["value"])
    reason = str(result.get("reason") or "").replace(node, "<node>")
    return "reason " + _NUM.sub("#", reason)[:200], None


def _largest_similar(values: list[tuple[str, float]], similar_pct: float) -> list[str]:
    med = statistics.median(v for _, v in values)
    if med == 0:
        return [n for n, v in values if v == 0]
    return [n for n, v in values if abs(v - med) / abs(med) * 100.0 <= similar_pct]


def circuit_breaker(
    docs: Mapping[str, Mapping[str, Any]], *, share: float = 0.5, min_nodes: int = 3, similar_pct: float = 10.0
) -> BreakerVerdict:
    """Judge the swept nodes' results.json documents (node -> document; see the module doc)."""
    swept = sorted(docs)
    if len(swept) < min_nodes:
        return BreakerVerdict(
            False, f"{len(swept)} node(s) swept: fewer than {min_nodes}, no pattern to judge", swept=len(swept)
        )
    groups: dict[tuple[str, str], list[tuple[str, float | None]]] = defaultdict(list)
    for node in swept:
        for r in docs[node].get("results") or []:
            if r.get("verdict") == "fail" and r.get("node") == node:
                sig, value = failure_signature(r, node)
                groups[(str(r["check"]), sig)].append((node, value))
    best: tuple[float, str, str, list[str]] | None = None
    for (check, sig), members in groups.items():
        numeric = [(n, v) for n, v in members if v is not None]
        nodes = _largest_similar(numeric, similar_pct) if numeric else [n for n, _ in members]
        frac = len(set(nodes)) / len(swept)
        if best is None or frac > best[0]:
            best = (frac, check, sig, sorted(set(nodes)))
    if best is None:
        return BreakerVerdict(False, "no swept node failed", swept=len(swept))
    frac, check, sig, nodes = best
    if frac <= share:
        return BreakerVerdict(
            False,
            f"largest same-way failure: {check} on {len(nodes)}/{len(swept)} nodes ({frac:.0%} <= {share:.0%})",
            check,
            tuple(nodes),
            frac,
            len(swept),
        )
    return BreakerVerdict(
        True,
        f"{len(nodes)} of {len(swept)} swept nodes ({frac:.0%} > {share:.0%}) fail {check} the same way ({sig}): "
        "nvtest suspects itself (its environment, a shipped file, a threshold) before the hardware; nothing drained",
        check,
        tuple(nodes),
        frac,
        len(swept),
        {"signature": sig},
    )
