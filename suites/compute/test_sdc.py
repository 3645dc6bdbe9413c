"""Silent data corruption: the same computation, bit for bit, on every GPU of the fleet.

Every GPU of every node runs the same deterministic workloads (a chain of GEMMs
per dtype and a few training steps of the smoke model; fixed seed and shapes,
deterministic algorithms on, a fixed thread count on a CPU) and reports a sha256
digest of its outputs. GPUs whose configuration determines the same bits (GPU
model, driver, CUDA and library versions, dtype, CPU thread count) are compared:
a GPU whose digest differs from its group's majority fails, named with its node,
index and serial; a GPU alone in its configuration is a warning (nothing to
compare); groups on different configurations that differ are a configuration
difference (a run warning), not corruption.

The check is :func:`nvtest.checks.compute.sdc.compare_fleet`.
"""

from __future__ import annotations

import pytest

from nvtest.checks.api import Fleet, Judge, Node
from nvtest.checks.compute import sdc


@pytest.mark.check("sdc", area="compute", title="Silent data corruption: the same bits on every GPU of the fleet")
def test_sdc(node: Node, judge: Judge, fleet: Fleet) -> None:
    """This node's GPUs against every GPU of the same configuration in the run."""
    sdc.compare_fleet(fleet, node, judge)
