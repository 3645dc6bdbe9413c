"""Inventory: what each node is, against what its SKU says it must be.

Reads the facts gathered once at the start of the run (``inventory_probe.py``:
/proc, ``lspci -vmm -nn -D``, ``nvidia-smi -q -x``); runs nothing new on the node.
"""

from __future__ import annotations

import pytest

from nvtest.checks.api import Judge, NodeFacts, RunContext, SkuProfile
from nvtest.checks.health import apply
from nvtest.checks.health.gpus import gpu_inventory
from nvtest.checks.health.host import host_inventory
from nvtest.checks.shape import judge_shape


@pytest.mark.check("host", area="inventory", title="Host: CPU, memory, OS")
def test_host(node, node_facts: NodeFacts, judge: Judge) -> None:
    """CPU model, sockets and cores, memory and OS of the node."""
    apply(host_inventory(node_facts), judge)


@pytest.mark.check("gpus", area="inventory", title="GPUs: count, model, driver, ECC, MIG, PCIe link")
def test_gpus(node, node_facts: NodeFacts, sku: SkuProfile | None, judge: Judge, nvtest_context: RunContext) -> None:
    """GPU count and model against the PCI bus and the SKU, ECC on, MIG off, PCIe link width at
    its maximum: nvidia-smi must report every NVIDIA GPU the PCI bus shows (fewer fails with
    nvidia-smi's own words: a driver that is not loaded, a library mismatch, a lost GPU). The
    GPUs' PCI slots and NUMA nodes must match the SKU's golden shape (the fleet's majority).
    Skipped only where the PCI bus proves there is no NVIDIA GPU."""
    judge_shape(judge, nvtest_context, node, ("gpu_pci", "gpu_numa"))
    apply(gpu_inventory(node_facts, sku, nvtest_context.catalog), judge)
