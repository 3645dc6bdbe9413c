"""The Playbook's platform audit: PCIe ACS, IOMMU, NUMA locality, GPUDirect RDMA, persistence mode.

One read-only probe per node (``config_probe.py``: sysfs, ``lspci -D -vvv``,
``nvidia-smi --query-gpu``) feeds every check; each finding names its source and the
Playbook's next step. A node whose PCI bus shows no GPU and no RDMA NIC skips, naming
the readings that proved it (sysfs and lspci); a GPU or NIC that the bus or the SKU shows
and the probe did not find fails.
"""

from __future__ import annotations

import pytest

from nvtest.checks.api import Judge, NodeFacts, SkuProfile
from nvtest.checks.config.acs import pcie_acs
from nvtest.checks.config.gpudirect import gpudirect_rdma
from nvtest.checks.config.iommu import iommu_mode
from nvtest.checks.config.numa import harness_binding_on, numa_affinity
from nvtest.checks.config.persistence import persistence_mode
from nvtest.checks.config.probe import CONFIG_PROBE, platform
from nvtest.checks.health import apply


@pytest.mark.check("pcie_acs", area="config", title="PCIe ACS on the bridges between GPUs and NICs")
def test_pcie_acs(node, judge: Judge, measure, node_facts: NodeFacts, sku: SkuProfile | None) -> None:
    """ACS redirect (ReqRedir/CmpltRedir/UpstreamFwd/EgressCtrl) on a PCIe switch port above a GPU or NIC fails."""
    apply(pcie_acs(platform(measure(CONFIG_PROBE), node_facts, sku)), judge)


@pytest.mark.check("iommu", area="config", title="IOMMU mode of the GPUs and NICs")
def test_iommu(node, judge: Judge, measure, node_facts: NodeFacts, sku: SkuProfile | None) -> None:
    """A translating IOMMU domain (DMA, DMA-FQ) fails; passthrough (iommu=pt) or off passes."""
    apply(iommu_mode(platform(measure(CONFIG_PROBE), node_facts, sku)), judge)


@pytest.mark.check("numa_affinity", area="config", title="NUMA node of each GPU and NIC vs the harness's CPUs")
def test_numa_affinity(node, judge: Judge, measure, node_facts: NodeFacts, sku: SkuProfile | None) -> None:
    """No NUMA node on a multi-socket machine, or no usable CPU local to a device, fails; the binding is recorded."""
    binding = harness_binding_on(node)
    apply(numa_affinity(platform(measure(CONFIG_PROBE), node_facts, sku), binding), judge)


@pytest.mark.check("gpudirect_rdma", area="config", title="GPUDirect RDMA: nvidia-peermem")
def test_gpudirect_rdma(node, judge: Judge, measure, node_facts: NodeFacts, sku: SkuProfile | None) -> None:
    """GPUs and RDMA NICs on the bus without nvidia_peermem loaded fails."""
    apply(gpudirect_rdma(platform(measure(CONFIG_PROBE), node_facts, sku)), judge)


@pytest.mark.check("persistence_mode", area="config", title="GPU persistence mode")
def test_persistence_mode(node, judge: Judge, measure, node_facts: NodeFacts, sku: SkuProfile | None) -> None:
    """A GPU nvidia-smi cannot report on fails; mixed modes fail; Disabled warns (fails where the SKU requires it)."""
    recipe = (sku.recipe.get("config") if sku else None) or {}
    apply(persistence_mode(platform(measure(CONFIG_PROBE), node_facts, sku), recipe), judge)
