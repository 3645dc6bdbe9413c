"""When automation may act on a finding: one rule for every side effect nvtest takes.

``nvtest run --drain-failed``, ``nvtest sweep --drain`` and ``nvtest gate --drain`` change
Slurm on the strength of a finding. A finding they act on must be a failure *proven on
the node*: a ``fail`` verdict (never ``error``/``unknown``: what could not be measured is a
mistake of ours or of the environment until shown otherwise) whose cause the run did not
pin on something shared by many nodes. :func:`why_not_act` says, for one result, why it may
not be acted on (None: it may). It refuses:

- any verdict but ``fail`` (an ``error``, ``unknown``, ``warn``, ``skip``);
- a check the run flagged *systemic* (every node of the SKU, :data:`SYSTEMIC_MIN_NODES` or
  more, failing it: :func:`nvtest.analysis.outliers.systemic_failures`), and a result
  diagnosed ``systemic``: the thresholds, the recipe or the environment are suspect first;
- a result whose diagnosis pins the cause outside the node (:data:`NOT_THE_NODE`: shared
  storage, the harness itself).

:func:`drain_plan` applies it to a whole run, per node, and adds the fleet guard: one run
never drains more than ``max_fraction`` of its nodes (:data:`DRAIN_MAX_FRACTION`, 25 %;
at least one node may always be drained) unless the operator raises the limit
explicitly (``--drain-max-fraction 1``): past it nothing is drained, since a failure on so
many nodes at once is more likely a harness or site mistake than that many broken nodes.
Pure: results.json documents in, decisions out.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from nvtest.analysis.outliers import SYSTEMIC_MIN_NODES
from nvtest.text import one_line

__all__ = [
    "DRAIN_MAX_FRACTION",
    "NOTHING_FAILED",
    "NOT_THE_NODE",
    "DrainDecision",
    "drain_limit",
    "drain_plan",
    "first_actionable",
    "systemic_pairs",
    "why_not_act",
]

#: The decision on a node none of whose results failed or errored.
NOTHING_FAILED = "not drained: nothing failed"

#: The largest share of a run's nodes one run drains without an explicit override.
DRAIN_MAX_FRACTION = 0.25

#: Diagnosis causes that put the fault outside the node (matched case-insensitively on the
#: diagnosis's cause and rule): shared storage, the harness, the environment of the fleet.
NOT_THE_NODE = re.compile(
    r"\bsystemic\b|every node of this SKU|shared file ?system|\bstorage\b|\bNFS\b|\bLustre\b|\bGPFS\b"
    r"|a mistake of nvtest",
    re.IGNORECASE,
)


def systemic_pairs(doc: Mapping[str, Any]) -> set[tuple[str, str]]:
    """(node, check) pairs of the run's systemic failures (``fleet.systemic`` of results.json)."""
    out: set[tuple[str, str]] = set()
    for s in ((doc.get("fleet") or {}).get("systemic")) or []:
        for node in s.get("nodes") or []:
            out.add((str(node), str(s.get("check"))))
    return out


def why_not_act(result: Mapping[str, Any], systemic: Iterable[tuple[str, str]] = ()) -> str | None:
    """Why automation may not act on ``result`` (a results.json result, or any mapping with
    ``check``, ``node``, ``verdict`` and optionally ``diagnosis``); None when it may.

    ``systemic``: the run's (node, check) pairs flagged systemic (:func:`systemic_pairs`).
    """
    verdict = str(result.get("verdict") or "unknown")
    check = str(result.get("check") or "?")
    if verdict != "fail":
        if verdict in ("error", "unknown"):
            return f"{check} is {verdict}: not measured (ours or the environment's until shown otherwise), not a failure proven on the node"
        return f"{check} is {verdict}, not a failure"
    if (str(result.get("node")), check) in set(systemic):
        return (
            f"{check} failed on every node of the SKU ({SYSTEMIC_MIN_NODES} or more): systemic, "
            "suspect the harness, thresholds, configuration or environment before the node"
        )
    diag = result.get("diagnosis") or {}
    words = f"{diag.get('rule') or ''} {diag.get('cause') or ''}"
    if diag and NOT_THE_NODE.search(words):
        return f"{check}: the diagnosis puts the cause outside the node ({one_line(str(diag.get('cause') or diag.get('rule')), 160)})"
    return None


def first_actionable(
    results: Iterable[Mapping[str, Any]], systemic: Iterable[tuple[str, str]] = ()
) -> tuple[Mapping[str, Any] | None, list[str]]:
    """The first result of ``results`` automation may act on (None if none) and, when none,
    why not for each failing or erroring one (in order)."""
    pairs = set(systemic)
    refused: list[str] = []
    for r in results:
        why = why_not_act(r, pairs)
        if why is None:
            return r, []
        if r.get("verdict") in ("fail", "error", "unknown"):
            refused.append(why)
    return None, refused


@dataclass(frozen=True)
class DrainDecision:
    """One node's drain decision: ``drain`` True with the (check, reason) it is drained
    for, or False with ``why`` it is not."""

    node: str
    drain: bool
    why: str
    check: str | None = None
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "drain": self.drain, "why": self.why, "check": self.check, "reason": self.reason}


def drain_limit(nodes: int, max_fraction: float) -> int:
    """The most nodes one run drains: ``floor(max_fraction * nodes)``, at least 1."""
    return max(1, math.floor(max_fraction * nodes + 1e-9))


def drain_plan(doc: Mapping[str, Any], max_fraction: float = DRAIN_MAX_FRACTION) -> list[DrainDecision]:
    """Per node of the run (results.json ``doc``, analysed), whether ``--drain-failed``
    drains it and why (sorted by node).

    A node is drained for its first result :func:`why_not_act` allows; a node with none
    is not, with the reasons. When more nodes qualify than :func:`drain_limit` allows for
    ``max_fraction`` of the run's nodes, none is drained (each says so).

    Raises:
        ValueError: ``max_fraction`` not in (0, 1].
    """
    if not (0 < max_fraction <= 1) or math.isnan(max_fraction):
        raise ValueError(f"max_fraction must be in (0, 1], got {max_fraction}")
    pairs = systemic_pairs(doc)
    by_node: dict[str, list[Mapping[str, Any]]] = {str(n): [] for n in doc.get("nodes") or {}}
    for r in doc.get("results") or []:
        by_node.setdefault(str(r["node"]), []).append(r)
    decisions: dict[str, DrainDecision] = {}
    candidates: list[DrainDecision] = []
    for node, rs in sorted(by_node.items()):
        first, refused = first_actionable(rs, pairs)
        if first is not None:
            d = DrainDecision(
                node,
                True,
                f"{first['check']} failed on this node",
                str(first["check"]),
                str(first.get("reason") or "failed"),
            )
            candidates.append(d)
        elif refused:
            d = DrainDecision(node, False, "not drained: " + "; ".join(dict.fromkeys(refused)))
        else:
            d = DrainDecision(node, False, NOTHING_FAILED)
        decisions[node] = d
    limit = drain_limit(len(by_node), max_fraction)
    if len(candidates) > limit:
        why = (
            f"not drained: {len(candidates)} of {len(by_node)} nodes failed, more than the "
            f"{max_fraction:.0%} one run may drain ({limit}): suspect the harness or the site before "
            "that many nodes; drain by hand, or rerun with a larger --drain-max-fraction"
        )
        for d in candidates:
            decisions[d.node] = DrainDecision(d.node, False, f"{why} (it failed {d.check})", d.check, d.reason)
    return [decisions[n] for n in sorted(decisions)]
