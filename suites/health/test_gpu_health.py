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

from nvtest.checks.api import Judge, Probe
from nvtest.checks.hardware import (
    expected_gpus,
    expected_hcas,
    expected_nvswitches,
    read_tool,
    require,
    tool_words,
    unreported,
)
from nvtest.checks.health import apply
from nvtest.checks.health.clocks import idle_throttle
from nvtest.checks.health.ecc import ecc_health
from nvtest.checks.health.gpus import driver_stack
from nvtest.checks.health.nvlink import FM_SCRIPT, fabric_manager, nvlink_status, split_sections
from nvtest.checks.health.pcie import SYSFS_SCRIPT, hops_from_sysfs, missing_hops, pcie_links
from nvtest.checks.shape import judge_shape
from nvtest.config.thresholds import SkuProfile
from nvtest.errors import ProbeSkip
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


@pytest.mark.check("driver_stack", area="health", title="NVIDIA driver and CUDA versions")
def test_driver_stack(node, judge: Judge, node_facts: NodeFacts, sku: SkuProfile | None) -> None:
    """Driver at least the SKU's ``min_driver``; the CUDA version the driver supports."""
    apply(driver_stack(node_facts, sku), judge)


@pytest.mark.check(
    "ecc", area="health", title="ECC mode, uncorrectable errors, retired pages, row remapping"
)
def test_ecc(node, judge: Judge, node_facts: NodeFacts, raw, sku: SkuProfile | None) -> None:
    """``nvidia-smi -q -x``: ECC on, no uncorrectable error, no pending or failed remap, no lost GPU."""
    exp = require(expected_gpus(node_facts, sku))
    query = read_tool(exp, "nvidia-smi -q -x", raw(SMI_XML), nvidia_smi_xml.parse)
    apply(ecc_health(query, sku), judge)


@pytest.mark.check("clocks", area="health", title="Clock-throttle reasons at idle (heat, power delivery)")
def test_clocks(node, judge: Judge, node_facts: NodeFacts, raw, sku: SkuProfile | None) -> None:
    """``nvidia-smi -q -x`` Clocks Event Reasons of idle GPUs: a hardware slowdown (thermal, power
    brake) fails, a software thermal slowdown warns; the gate judges the same way."""
    exp = require(expected_gpus(node_facts, sku))
    query = read_tool(exp, "nvidia-smi -q -x", raw(SMI_XML), nvidia_smi_xml.parse)
    apply(idle_throttle(query), judge)


@pytest.mark.check("nvlink", area="health", title="NVLink: every expected link active at speed")
def test_nvlink(node, judge: Judge, node_facts: NodeFacts, raw, sku: SkuProfile | None) -> None:
    """``nvidia-smi nvlink -s`` against the SKU's links per GPU and per-link speed."""
    exp = require(expected_gpus(node_facts, sku))
    if sku and sku.expect.nvlinks_per_gpu == 0:
        raise ProbeSkip(f"not on this hardware: PCIe SKU without NVLink ({sku.name} expect.nvlinks_per_gpu 0)")
    res = raw(NVLINK)
    if nvidia_smi_nvlink.detect(res.stdout):
        status = read_tool(exp, "nvidia-smi nvlink -s", res, nvidia_smi_nvlink.parse, stdout_only=True)
    elif res.exit_code != 0:
        raise unreported(exp, "nvidia-smi nvlink -s", tool_words(res))
    else:
        status = None
    apply(nvlink_status(status, sku), judge)


@pytest.mark.check("fabric_manager", area="health", title="Fabric manager on NVSwitch systems")
def test_fabric_manager(
    node, judge: Judge, node_facts: NodeFacts, raw, sku: SkuProfile | None, nvtest_context
) -> None:
    """Service active, version equal to the driver's, every GPU's fabric state Completed."""
    switches = require(expected_nvswitches(node_facts, sku))
    judge_shape(judge, nvtest_context, node, ("nvswitches",))
    res = raw(FABRIC)
    apply(
        fabric_manager(split_sections(res.stdout), node_facts.driver_version, nvswitches=switches.count),
        judge,
    )


@pytest.mark.check("pcie_link", area="health", title="PCIe width and speed per hop, GPUs and NICs")
def test_pcie_link(node, judge: Judge, node_facts: NodeFacts, raw, sku: SkuProfile | None) -> None:
    """Trained width against what the device and its slot can do, per hop; idle speed is a note.
    Every GPU and Mellanox NIC on the PCI bus must have its link attributes read."""
    gpus, nics = expected_gpus(node_facts, sku), expected_hcas(node_facts, sku)
    if not gpus.count and not nics.count:
        if gpus.absent and nics.absent:
            raise ProbeSkip(
                "not on this hardware: the PCI bus shows no NVIDIA GPU and no RDMA NIC (vendor 15b3) "
                f"({node_facts.bus_text()})"
            )
        require(gpus if gpus.absent is None else nics)
    hops = hops_from_sysfs(raw(PCIE).stdout)
    for missing in missing_hops(hops, node_facts):
        judge.fail(missing)
    if hops:
        apply(pcie_links(hops, sku), judge)
    elif not judge.failures:
        raise unreported(gpus if gpus.count else nics, "sysfs PCIe link attributes", "none read")
