"""The interfaces NCCL's bootstrap and socket traffic use, predicted from the node's own report.

``ip -d -j addr show`` from the ``config`` probe, NCCL's selection rules and the
environment nvtest gives NCCL on this node (the inventory's ``socket_ifname`` and
``ib_hca`` as ``NCCL_SOCKET_IFNAME==...``/``NCCL_IB_HCA==...``, the controller's NCCL
variables, the SKU recipe's): a container or VM bridge, or an address outside the
node's ``networks:``, fails. The NCCL checks judge the interfaces NCCL said it used the
same way.
"""

from __future__ import annotations

import pytest

from nvtest.checks.api import Judge, NodeFacts, RunContext, SkuProfile
from nvtest.checks.config.network import nccl_env_on, nccl_interfaces
from nvtest.checks.config.platform import bus_source
from nvtest.checks.config.probe import CONFIG_PROBE, platform
from nvtest.checks.health import apply


@pytest.mark.check("nccl_interfaces", area="config", title="Interfaces NCCL picks (bootstrap and socket)")
def test_nccl_interfaces(
    node, judge: Judge, measure, nvtest_context: RunContext, node_facts: NodeFacts, sku: SkuProfile | None
) -> None:
    """NCCL on a container/VM bridge, outside the node's networks, or on no interface at all fails."""
    p = platform(measure(CONFIG_PROBE), node_facts, sku)
    if not p.gpus:
        pytest.skip(f"not on this hardware: the PCI bus shows no NVIDIA GPU: NCCL does not run here ({bus_source(p)})")
    env = nccl_env_on(nvtest_context, node)
    ip = p.tool("ip")
    out = nccl_interfaces(
        ip.stdout if ip is not None and ip.reported else None,
        ip.words() if ip is not None else "the probe did not run ip",
        env,
        node.networks,
        p.infiniband,
        ip_source=ip.command if ip is not None and ip.cmd else "ip -d -j addr show",
        ib_source=p.sysfs("sys/class/infiniband"),
    )
    apply(out, judge)
