"""GPU health: driver stack, ECC and row remapping, clocks at idle, NVLink, fabric manager, PCIe links.

Raw tool output (``nvidia-smi -q -x``, ``nvidia-smi nvlink -s``, sysfs PCIe
link attributes, the fabric manager's state) is judged by the pure functions of
:mod:`nvtest.checks.health`. The GPUs, NVSwitches and NICs a node must have come
from its PCI bus and SKU (:mod:`nvtest.checks.hardware`): a tool that cannot report
on them fails the check with its own words; only a bus that shows none skips it,
naming the readings that proved it.
"""

from __future__ import annotations

import pytest

from nvtest.checks.api import DRIVER, Judge, NodeFacts, Probe, RunContext, SkuProfile
from nvtest.checks.health import apply
from nvtest.checks.health.clocks import idle_throttle
from nvtest.checks.health.ecc import ecc_health
from nvtest.checks.health.gpus import driver_stack
from nvtest.checks.health.nvlink import FM_SCRIPT, fabric_manager_on, nvlink_status, split_sections
from nvtest.checks.health.pcie import SYSFS_SCRIPT, hops_from_sysfs, pcie_link_health
from nvtest.checks.shape import judge_shape
from nvtest.parsers import nvidia_smi_nvlink, nvidia_smi_xml
from nvtest.parsers.nvidia_smi_nvlink import NvLinkStatus


def _nvlink(stdout: str) -> NvLinkStatus | None:
    """``nvidia-smi nvlink -s``'s report, or None where it printed none (a GPU without NVLink
    prints nothing and exits 0; a non-zero exit without a report fails in its words)."""
    return nvidia_smi_nvlink.parse(stdout) if nvidia_smi_nvlink.detect(stdout) else None


def _no_nvlink(sku: SkuProfile | None) -> str | None:
    if sku and sku.expect.nvlinks_per_gpu == 0:
        return f"not on this hardware: PCIe SKU without NVLink ({sku.name} expect.nvlinks_per_gpu 0)"
    return None


# a hung nvidia-smi is a wedged driver: it blocks every later check of the GPUs on the node
_SMI = ("nvidia-smi", "gpu")
SMI_XML = Probe(
    "nvidia-smi-q-x",
    command=("nvidia-smi", "-q", "-x"),
    timeout_s=120,
    needs=_SMI,
    expects="gpu",
    parse=nvidia_smi_xml.parse,
    package=DRIVER,
)
NVLINK = Probe(
    "nvidia-smi-nvlink",
    command=("nvidia-smi", "nvlink", "-s"),
    timeout_s=120,
    needs=_SMI,
    expects="gpu",
    parse=_nvlink,
    package=DRIVER,
    stdout_only=True,
    skip_if=_no_nvlink,
)
PCIE = Probe(
    "pcie-sysfs",
    command=("sh", "-c", SYSFS_SCRIPT),
    timeout_s=60,
    needs=("pci",),
    expects=("gpu", "hca"),
    parse=hops_from_sysfs,
    stdout_only=True,
)
FABRIC = Probe(
    "fabric-manager",
    command=("sh", "-c", FM_SCRIPT),
    timeout_s=60,
    needs=(*_SMI, "systemctl"),
    expects="nvswitch",
    parse=split_sections,
    stdout_only=True,
)


@pytest.mark.check("driver_stack", area="health", title="NVIDIA driver and CUDA versions")
def test_driver_stack(node, judge: Judge, node_facts: NodeFacts, sku: SkuProfile | None) -> None:
    """Driver at least the SKU's ``min_driver``; the CUDA version the driver supports."""
    apply(driver_stack(node_facts, sku), judge)


@pytest.mark.check("ecc", area="health", title="ECC mode, uncorrectable errors, retired pages, row remapping")
def test_ecc(node, judge: Judge, read, sku: SkuProfile | None) -> None:
    """``nvidia-smi -q -x``: ECC on, no uncorrectable error, no pending or failed remap, no lost GPU."""
    apply(ecc_health(read(SMI_XML), sku), judge)


@pytest.mark.check("clocks", area="health", title="Clock-throttle reasons at idle (heat, power delivery)")
def test_clocks(node, judge: Judge, read) -> None:
    """``nvidia-smi -q -x`` Clocks Event Reasons of idle GPUs: a hardware slowdown (thermal, power
    brake) fails, a software thermal slowdown warns; the gate judges the same way."""
    apply(idle_throttle(read(SMI_XML)), judge)


@pytest.mark.check("nvlink", area="health", title="NVLink: every expected link active at speed")
def test_nvlink(node, judge: Judge, read, sku: SkuProfile | None) -> None:
    """``nvidia-smi nvlink -s`` against the SKU's links per GPU and per-link speed."""
    apply(nvlink_status(read(NVLINK), sku), judge)


@pytest.mark.check("fabric_manager", area="health", title="Fabric manager on NVSwitch systems")
def test_fabric_manager(
    node, judge: Judge, node_facts: NodeFacts, read, sku: SkuProfile | None, nvtest_context: RunContext
) -> None:
    """Service active, version equal to the driver's, every GPU's fabric state Completed."""
    read.require_declared(FABRIC)  # the shape is judged on NVSwitch systems only, before the probe runs
    judge_shape(judge, nvtest_context, node, ("nvswitches",))
    apply(fabric_manager_on(read(FABRIC), node_facts, sku), judge)


@pytest.mark.check("pcie_link", area="health", title="PCIe width and speed per hop, GPUs and NICs")
def test_pcie_link(node, judge: Judge, node_facts: NodeFacts, read, sku: SkuProfile | None) -> None:
    """Trained width against what the device and its slot can do, per hop; idle speed is a note.
    Every GPU and Mellanox NIC on the PCI bus must have its link attributes read."""
    apply(pcie_link_health(read(PCIE), node_facts, sku), judge)
