"""Multi-node NVLink (GB200 NVL72): the IMEX channel and domain, and the bandwidth across nodes.

- ``imex``: on a node whose SKU shares GPU memory across nodes (``expect.imex``), an IMEX
  channel device, the ``nvidia-imex`` service active, and ``nvidia-imex-ctl -N``: every node of
  the domain ``READY``, every connection ``C``, ``Domain State: UP``
  (:func:`nvtest.checks.interconnect.imex.imex_health`).
- ``nvlink_multinode``: nvbandwidth's ``multinode_device_to_device_memcpy_read_ce`` in one
  mpirun (one srun step under Slurm) over the run's nodes of such a SKU, one rank per GPU; per GPU the slowest read from
  any other GPU (``mn_read_ce_gbps``, GB/s) against the SKU's threshold. The tool's own
  failure (``CUDA_ERROR_NOT_PERMITTED``: no IMEX channel) fails the node it names, in its words.

The orchestration is :mod:`nvtest.checks.interconnect.nvlink_multinode`.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from nvtest.checks.api import CommandResult, Fleet, Judge, Node, NodeFacts, Probe, SkuProfile
from nvtest.checks.interconnect import nvlink_multinode


@pytest.mark.check("imex", area="interconnect", title="IMEX channel, service and domain (multi-node NVLink)")
def test_imex(
    node: Node, judge: Judge, node_facts: NodeFacts, raw: Callable[[Probe], CommandResult], sku: SkuProfile | None
) -> None:
    """An IMEX channel device, nvidia-imex active, every domain node READY and connected."""
    nvlink_multinode.imex(node_facts, raw, sku, judge)


@pytest.mark.check(
    "nvlink_multinode", area="interconnect", title="NVLink bandwidth across nodes (nvbandwidth multinode)"
)
def test_nvlink_multinode(
    node: Node, judge: Judge, node_facts: NodeFacts, fleet: Fleet, sku: SkuProfile | None
) -> None:
    """The slowest multi-node NVLink read per GPU against ``nvlink_multinode.mn_read_ce_gbps``."""
    nvlink_multinode.bandwidth(fleet, node, node_facts, sku, judge)
