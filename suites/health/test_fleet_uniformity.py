"""Software and firmware uniformity: each node against the majority of its SKU's nodes.

Driver, CUDA, VBIOS, kernel and torch come from the inventory facts; OFED, HCA
firmware, NCCL, its net plugin and the fabric manager from a small shell probe.
The odd node out is named (a mixed fleet hangs multi-node jobs with no error).
"""

from __future__ import annotations

import pytest

from nvtest.checks.api import Judge, NodeError, Probe, each_node, raw_output
from nvtest.checks.health import apply
from nvtest.checks.health.uniformity import (
    VERSIONS_SCRIPT,
    fleet_counts,
    uniformity,
    versions_from_facts,
    versions_from_probe,
)
from nvtest.jobs.base import fleet_cache
from nvtest.session.context import RunContext
from nvtest.session.facts import NodeFacts

VERSIONS = Probe(
    "sw-versions", command=("sh", "-c", VERSIONS_SCRIPT), timeout_s=60,
    needs=("ofed_info", "nv-fabricmanager", "hca"),
)  # fmt: skip


@pytest.mark.check(
    "sw_uniformity", area="health", title="Driver, firmware and library versions across the fleet"
)
def test_sw_uniformity(
    node, judge: Judge, node_facts: NodeFacts, nvtest_context: RunContext
) -> None:
    """Compare this node's versions with the majority of the nodes of its SKU."""
    ctx = nvtest_context
    mine = ctx.states[node.name].match
    sku_name = mine.name if mine else None
    targets = ctx.check_targets("sw_uniformity")
    # the fleet's versions and their counts, once per SKU (not a pass over the fleet per node)
    fleet, counts = fleet_cache(ctx).get(f"sw_uniformity:{sku_name}", lambda: _fleet(ctx, sku_name, targets))
    judge.log = ctx.phases.log_path(VERSIONS.name, node.name)
    if node.name not in fleet:
        raw_output(ctx, VERSIONS, node, targets)  # this node's own error, if its probe failed
        raise NodeError("no versions gathered from this node")
    judge.detail("effective", {"nodes_compared": sorted(fleet), "versions": sorted(fleet[node.name])})
    apply(uniformity(node.name, fleet, counts), judge)


def _fleet(ctx: RunContext, sku_name: str | None, targets: list) -> tuple[dict[str, dict], dict]:
    """Node -> versions for the reachable nodes of ``sku_name`` whose probe answered, and
    :func:`fleet_counts` of them."""
    same = [
        n for n in targets
        if (st := ctx.states[n.name]).facts is not None and not st.down_reason
        and (st.match.name if st.match else None) == sku_name
    ]  # fmt: skip

    def versions(n) -> dict:
        facts = ctx.states[n.name].facts
        res = raw_output(ctx, VERSIONS, n, targets)
        return {**versions_from_facts(facts), **versions_from_probe(res.stdout)}

    fleet, _ = each_node(same, versions)
    return fleet, fleet_counts(fleet)
