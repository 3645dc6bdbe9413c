"""NCCL collectives with nccl-tests: inside each node, through the NICs only, and across nodes.

- ``nccl``: every operation of the recipe (``recipe.nccl.ops``; default all_reduce) over the
  node's GPUs, one rank per GPU (``-g <gpus>``), sizes up to ``max_bytes``.
- ``nccl_nics_only``: all_reduce with ``NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1``: traffic
  leaves through the NICs, separating NVLink faults from NIC faults.
- ``nccl_multinode``: one launch over all nodes (mpirun from the first node, or srun under
  Slurm), one rank per GPU; when it does not pass, the nodes are re-tested in pairs (ring)
  and the node common to the failing pairs is blamed (confirmed with a known-good node).

Verdicts (:mod:`nvtest.jobs.nccl`; the orchestration is :mod:`nvtest.checks.interconnect.nccl`):
busbw at the plateau, wrong results fail whatever the bandwidth; a sweep the tool shortened below the threshold's point (its own "Reducing
maxBytes" line), validation switched off, or missing ranks is an error; NCCL WARN lines and
the error site are in the reason; what ran (sizes, validation, ranks, GPUs, dtype) is in the
details beside what was asked. Across nodes and through the NICs only, on a SKU with RDMA NICs
(``expect.ib_hcas``), the path NCCL says it took decides whatever the bandwidth: TCP sockets
(``Using network Socket``) or GPUDirect RDMA disabled on an HCA fails naming NCCL's line; no
line saying which network it used is an error. all_reduce inside a node and across nodes, on a
SKU with ``expect.nvls``: NCCL saying NVLink SHARP is not available, or failing to bind its
multicast memory, fails naming the line (``expect.collnet``: no CollNet across nodes fails).
The GPUs a node must have come from its PCI bus and SKU: nccl-tests missing there is an
``error``, never a skip. ``NCCL_DEBUG=INFO`` output goes to the evidence log. Binaries: the
recipe's ``tests_dir``, ``$NVTEST_NCCL_TESTS_DIR``, or the node's PATH.
"""

from __future__ import annotations

import pytest

from nvtest.checks.api import Fleet, Judge, Node, NodeFacts
from nvtest.checks.interconnect import nccl


@pytest.mark.check("nccl", area="interconnect", title="NCCL collectives inside the node (busbw)")
def test_nccl(node: Node, node_facts: NodeFacts, fleet: Fleet, judge: Judge) -> None:
    nccl.intra(fleet, node, node_facts, judge)


@pytest.mark.check("nccl_nics_only", area="interconnect", title="NCCL all_reduce through the NICs only")
def test_nccl_nics_only(node: Node, node_facts: NodeFacts, fleet: Fleet, judge: Judge) -> None:
    nccl.intra(fleet, node, node_facts, judge, nics_only=True)


@pytest.mark.check("nccl_multinode", area="interconnect", title="NCCL across nodes (busbw), pairs to localize")
def test_nccl_multinode(node: Node, node_facts: NodeFacts, fleet: Fleet, judge: Judge) -> None:
    nccl.multinode(fleet, node, node_facts, judge)
