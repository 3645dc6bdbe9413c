"""Software and firmware uniformity: each node against the majority of its SKU's nodes.

Driver, CUDA, VBIOS, kernel and torch come from the inventory facts; OFED, HCA
firmware, NCCL, its net plugin and the fabric manager from a small shell probe.
The odd node out is named (a mixed fleet hangs multi-node jobs with no error).
"""

from __future__ import annotations

import pytest

from nvtest.checks.api import Judge, NodeFacts, Probe, RunContext
from nvtest.checks.health import apply
from nvtest.checks.health.uniformity import VERSIONS_SCRIPT, fleet_versions, uniformity

VERSIONS = Probe(
    "sw-versions",
    command=("sh", "-c", VERSIONS_SCRIPT),
    timeout_s=60,
    needs=("ofed_info", "nv-fabricmanager", "hca"),
)


@pytest.mark.check("sw_uniformity", area="health", title="Driver, firmware and library versions across the fleet")
def test_sw_uniformity(node, judge: Judge, node_facts: NodeFacts, nvtest_context: RunContext) -> None:
    """Compare this node's versions with the majority of the nodes of its SKU."""
    judge.log = nvtest_context.phases.log_path(VERSIONS.name, node.name)
    # the fleet's versions and their counts, once per SKU (not a pass over the fleet per node)
    fleet, counts = fleet_versions(nvtest_context, node, VERSIONS)
    judge.detail("effective", {"nodes_compared": sorted(fleet), "versions": sorted(fleet[node.name])})
    apply(uniformity(node.name, fleet, counts), judge)
