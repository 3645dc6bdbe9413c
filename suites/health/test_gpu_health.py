"""GPU health: driver stack, ECC and row remapping, NVLink, fabric manager, PCIe links.

Raw tool output (``nvidia-smi -q -x``, ``nvidia-smi nvlink -s``, sysfs PCIe
link attributes, the fabric manager's state) is judged by the pure functions of
:mod:`nvtest.checks.health`; a node without an NVIDIA GPU skips with the reason.
"""

from __future__ import annotations

import pytest

from nvtest.checks.api import Judge, Probe
from nvtest.checks.health import apply
from nvtest.checks.health.ecc import ecc_health
from nvtest.checks.health.gpus import driver_stack
from nvtest.checks.health.nvlink import FM_SCRIPT, fabric_manager, nvlink_status, split_sections
from nvtest.checks.health.pcie import SYSFS_SCRIPT, hops_from_sysfs, pcie_links
from nvtest.config.thresholds import SkuProfile
from nvtest.parsers import nvidia_smi_nvlink, nvidia_smi_xml
from nvtest.session.facts import NodeFacts

# a hung nvidia-smi is a wedged driver: it blocks every later check of the GPUs on the node
_SMI = ("nvidia-smi", "gpu")
SMI_XML = Probe("nvidia-smi-q-x", command=("nvidia-smi", "-q", "-x"), timeout_s=120, needs=_SMI)
NVLINK = Probe("nvidia-smi-nvlink", command=("nvidia-smi", "nvlink", "-s"), timeout_s=120, needs=_SMI)
PCIE = Probe("pcie-sysfs", command=("sh", "-c", SYSFS_SCRIPT), timeout_s=60, needs=("pci",))
FABRIC = Probe(
    "fabric-manager", command=("sh", "-c", FM_SCRIPT), timeout_s=60, needs=(*_SMI, "systemctl")
)


def _need_gpus(facts: NodeFacts, sku: SkuProfile | None) -> None:
    if not facts.gpus and not (sku and sku.expect.gpus):
        pytest.skip(facts.gpu_absent_reason or "no NVIDIA GPU")


@pytest.mark.check("driver_stack", area="health", title="NVIDIA driver and CUDA versions")
def test_driver_stack(node, judge: Judge, node_facts: NodeFacts, sku: SkuProfile | None) -> None:
    """Driver at least the SKU's ``min_driver``; the CUDA version the driver supports."""
    out = driver_stack(
        node_facts.driver_version, node_facts.cuda_version, sku, has_gpus=bool(node_facts.gpus)
    )
    apply(out, judge)


@pytest.mark.check(
    "ecc", area="health", title="ECC mode, uncorrectable errors, retired pages, row remapping"
)
def test_ecc(node, judge: Judge, node_facts: NodeFacts, raw, sku: SkuProfile | None) -> None:
    """``nvidia-smi -q -x``: ECC on, no uncorrectable error, no pending or failed remap, no lost GPU."""
    _need_gpus(node_facts, sku)
    res = raw(SMI_XML)
    apply(ecc_health(nvidia_smi_xml.parse(res.stdout + "\n" + res.stderr), sku), judge)


@pytest.mark.check("nvlink", area="health", title="NVLink: every expected link active at speed")
def test_nvlink(node, judge: Judge, node_facts: NodeFacts, raw, sku: SkuProfile | None) -> None:
    """``nvidia-smi nvlink -s`` against the SKU's links per GPU and per-link speed."""
    _need_gpus(node_facts, sku)
    if sku and sku.expect.nvlinks_per_gpu == 0:
        pytest.skip(f"PCIe SKU without NVLink ({sku.name})")
    res = raw(NVLINK)
    status = nvidia_smi_nvlink.parse(res.stdout) if nvidia_smi_nvlink.detect(res.stdout) else None
    apply(nvlink_status(status, sku), judge)


@pytest.mark.check("fabric_manager", area="health", title="Fabric manager on NVSwitch systems")
def test_fabric_manager(
    node, judge: Judge, node_facts: NodeFacts, raw, sku: SkuProfile | None
) -> None:
    """Service active, version equal to the driver's, every GPU's fabric state Completed."""
    _need_gpus(node_facts, sku)
    switches = sku.expect.nvswitches if sku and sku.expect.nvswitches is not None else None
    if switches is None:
        switches = sum(1 for p in node_facts.nvidia_pci if "nvswitch" in p.device.lower())
    if not switches:
        pytest.skip("no NVSwitch on this node or SKU: no fabric manager needed")
    res = raw(FABRIC)
    apply(
        fabric_manager(split_sections(res.stdout), node_facts.driver_version, nvswitches=switches),
        judge,
    )


@pytest.mark.check("pcie_link", area="health", title="PCIe width and speed per hop, GPUs and NICs")
def test_pcie_link(node, judge: Judge, node_facts: NodeFacts, raw, sku: SkuProfile | None) -> None:
    """Trained width against what the device and its slot can do, per hop; idle speed is a note."""
    res = raw(PCIE)
    hops = hops_from_sysfs(res.stdout)
    if not hops:
        pytest.skip("no NVIDIA GPU or Mellanox NIC with PCIe link attributes in /sys/bus/pci")
    apply(pcie_links(hops, sku), judge)
