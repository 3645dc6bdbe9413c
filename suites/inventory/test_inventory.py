"""Inventory: what each node is, against what its SKU says it must be.

Reads the facts gathered once at the start of the run (``inventory_probe.py``:
/proc, ``lspci -vmm -nn -D``, ``nvidia-smi -q -x``); runs nothing new on the node.
"""

from __future__ import annotations

import pytest

from nvtest.checks.api import Judge
from nvtest.checks.health import apply
from nvtest.checks.health.gpus import gpu_inventory
from nvtest.checks.health.host import host_inventory
from nvtest.config.thresholds import SkuProfile
from nvtest.session.context import RunContext
from nvtest.session.facts import NodeFacts


@pytest.mark.check("host", area="inventory", title="Host: CPU, memory, OS")
def test_host(node, node_facts: NodeFacts, judge: Judge) -> None:
    """CPU model, sockets and cores, memory and OS of the node."""
    apply(host_inventory(node_facts), judge)


@pytest.mark.check(
    "gpus", area="inventory", title="GPUs: count, model, driver, ECC, MIG, PCIe link"
)
def test_gpus(
    node, node_facts: NodeFacts, sku: SkuProfile | None, judge: Judge, nvtest_context: RunContext
) -> None:
    """GPU count and model against the SKU, ECC on, MIG off, PCIe link width at its maximum,
    and as many NVIDIA GPUs in lspci as nvidia-smi reports (a lost GPU shows as fewer).
    A node that matched no profile only because of its GPU count is judged against the
    closest profile (see nvtest.checks.health.gpus)."""
    apply(gpu_inventory(node_facts, sku, nvtest_context.catalog), judge)
