"""Software and firmware uniformity: each node against the majority of its SKU's nodes.

Driver, CUDA, VBIOS, kernel and torch come from the inventory facts; OFED, HCA
firmware, NCCL, its net plugin and the fabric manager from a small shell probe.
The odd node out is named (a mixed fleet hangs multi-node jobs with no error).
"""

from __future__ import annotations

import pytest

from nvtest.checks.api import Judge, NodeError, Probe, raw_output
from nvtest.checks.health import apply
from nvtest.checks.health.uniformity import (
    VERSIONS_SCRIPT,
    uniformity,
    versions_from_facts,
    versions_from_probe,
)
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
    by_name = ctx.inventory.by_name()
    names = ctx.check_nodes.get("sw_uniformity") or list(by_name)
    targets = [by_name[n] for n in names]
    mine = ctx.states[node.name].match
    sku_name = mine.name if mine else None
    fleet = {}
    for n in targets:
        st = ctx.states[n.name]
        if st.facts is None or st.down_reason or (st.match.name if st.match else None) != sku_name:
            continue
        try:
            res = raw_output(ctx, VERSIONS, n, targets)
        except NodeError:
            if n.name == node.name:
                raise
            continue
        fleet[n.name] = {**versions_from_facts(st.facts), **versions_from_probe(res.stdout)}
    judge.log = ctx.phases.log_path(VERSIONS.name, node.name)
    if node.name not in fleet:
        pytest.skip("no versions gathered from this node")
    apply(uniformity(node.name, fleet), judge)
