"""InfiniBand / RoCE: port state per HCA, then bandwidth between node pairs.

- ``ib_ports``: ``ibstat`` and ``ibv_devinfo -v`` (nvtest's parsers): the SKU's HCAs present
  (count, and names when the recipe lists them), every port Active and LinkUp, at the SKU's
  rate, with the link layer the recipe names (InfiniBand or Ethernet for RoCE); the
  ``active_mtu`` of every active port (``ibv_devinfo``; ibstat prints none) at the SKU's
  ``expect.ib_mtu`` on InfiniBand ports, else the same as the node's other HCAs and the
  fleet's majority for the SKU: a port that differs fails naming the HCA and the tool's line.
- ``ib_write_bw``: perftest between node pairs per HCA, scheduled in rounds (ring by default;
  all-pairs or random matchings by recipe), servers first, clients once the servers listen; a
  failing pair is blamed on the node common to the failures and confirmed by re-pairing it
  with a known-good node. The exact command lines are in each item's details.
- ``tcp_bw``: where a node has no RDMA device, the same schedule with a TCP bandwidth probe,
  so the pairs still run for real.

The RDMA NICs a node must have come from its PCI bus (Mellanox functions), its SKU
(``expect.ib_hcas``) and sysfs (``/sys/class/infiniband``): only a node where none of them
shows one skips the RDMA checks, naming the bus readings; missing tools there are an
``error``, and a tool that lists no HCA fails with its words. The HCAs must match the
SKU's golden shape (``expect.hcas``, else the fleet's majority): a node with an HCA
missing or named differently fails ``ib_ports`` with the difference, and the pair test
names every HCA it had to leave out because a peer lacked it (an HCA never measured is an
``error`` of its node, never a quiet pass).

The orchestration is :mod:`nvtest.checks.interconnect.ib`.
"""

from __future__ import annotations

import pytest

from nvtest.checks.api import Fleet, Judge, Node, NodeFacts, SkuProfile
from nvtest.checks.interconnect import ib


@pytest.mark.check("ib_ports", area="interconnect", title="IB/RoCE ports: HCAs, state, rate, link layer")
def test_ib_ports(node: Node, node_facts: NodeFacts, fleet: Fleet, sku: SkuProfile | None, judge: Judge) -> None:
    ib.ports(fleet, node, node_facts, sku, judge)


@pytest.mark.check("ib_write_bw", area="interconnect", title="RDMA write bandwidth between node pairs (perftest)")
def test_ib_write_bw(node: Node, node_facts: NodeFacts, fleet: Fleet, sku: SkuProfile | None, judge: Judge) -> None:
    """Every HCA of the golden shape measured against a peer; an HCA the node lacks fails it,
    and one never measured because every peer lacked it is an error naming those peers."""
    ib.write_bw(fleet, node, node_facts, sku, judge)


@pytest.mark.check("tcp_bw", area="interconnect", title="TCP bandwidth between node pairs (no RDMA device)")
def test_tcp_bw(node: Node, fleet: Fleet, judge: Judge) -> None:
    ib.tcp_bw(fleet, node, judge)
