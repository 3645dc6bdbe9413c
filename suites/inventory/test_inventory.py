"""Inventory: what each node is, against what its SKU says it must be.

Reads the facts gathered once at the start of the run (``inventory_probe.py``:
/proc, ``lspci -vmm -nn -D``, ``nvidia-smi -q -x``); runs nothing new on the node.
"""

from __future__ import annotations

import pytest

from nvtest.check import Judge
from nvtest.facts import NodeFacts
from nvtest.thresholds import SkuProfile


@pytest.mark.check("host", area="inventory", title="Host: CPU, memory, OS")
def test_host(node, node_facts: NodeFacts, judge: Judge) -> None:
    """CPU model, sockets and cores, memory and OS of the node."""
    judge("cpu_cores", node_facts.cores, "count")
    judge("memory_gib", (node_facts.memory_total_kib or 0) / 1048576, "GiB")
    judge.detail(
        "host",
        {"cpu": node_facts.cpu_model, "sockets": node_facts.sockets, "os": node_facts.os, "kernel": node_facts.kernel},
    )


@pytest.mark.check("gpus", area="inventory", title="GPUs: count, model, driver, ECC, MIG, PCIe link")
def test_gpus(node, node_facts: NodeFacts, sku: SkuProfile | None, judge: Judge) -> None:
    """GPU count against the SKU, ECC on, MIG off, PCIe link width at its maximum,
    and as many NVIDIA GPUs in lspci as nvidia-smi reports (a lost GPU shows as fewer)."""
    expected = sku.expect.gpus if sku else None
    if not node_facts.gpus and not expected:
        pytest.skip(node_facts.gpu_absent_reason or "no NVIDIA GPU")
    count = len(node_facts.gpus)
    judge("gpu_count", count, "count")
    if expected is not None and count != expected:
        judge.fail(f"{count} GPUs visible to nvidia-smi, SKU {sku.name if sku else '?'} expects {expected}")
    pci_gpus = [p for p in node_facts.nvidia_pci if (p.class_id or "").startswith("03")]
    if pci_gpus and len(pci_gpus) > count:
        judge.fail(f"lspci lists {len(pci_gpus)} NVIDIA GPUs but nvidia-smi sees {count}: a GPU is lost")
    for g in node_facts.gpus:
        if g.ecc_mode is not None and g.ecc_mode.lower() != "enabled" and (sku is None or sku.expect.ecc is not False):
            judge.fail(f"GPU {g.index} ECC mode {g.ecc_mode}")
        if g.mig_mode is not None and g.mig_mode.lower() == "enabled":
            judge.warn(f"GPU {g.index} MIG enabled")
        if g.pcie_width_current is not None and g.pcie_width_max is not None:
            judge("pcie_width", g.pcie_width_current, "lanes", gpu=g.index)
            if g.pcie_width_current < g.pcie_width_max:
                judge.fail(f"GPU {g.index} PCIe x{g.pcie_width_current} of x{g.pcie_width_max} (link width downgraded)")
    if sku and sku.expect.min_driver and node_facts.driver_version:
        if _version(node_facts.driver_version) < _version(sku.expect.min_driver):
            judge.fail(f"driver {node_facts.driver_version} older than {sku.expect.min_driver}")
    judge.detail("driver", node_facts.driver_version)
    judge.detail("cuda", node_facts.cuda_version)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split(".") if p.isdigit())
