"""The ``read`` fixture's one place (:func:`nvtest.checks.hardware.read_declared`): each rule
a check once wrote by hand, applied from the probe's declaration, with the words it had."""

from __future__ import annotations

import pytest

from nvtest.checks.hardware import read_declared, require_declared
from nvtest.errors import ParseError, ProbeError, ProbeSkip, UnreportedHardware
from nvtest.parsers import nvidia_smi_xml
from nvtest.session.facts import NodeFacts, PciFact, PciSource
from nvtest.session.probe import DRIVER, Probe
from nvtest.transports.base import CommandResult
from tests.checks.health.conftest import corpus

SYSFS = PciSource("sysfs /sys/bus/pci/devices", True, 6)
GPU = PciFact("0000:18:00.0", "3D controller", "0302", "NVIDIA", "10de", "GH100", "2330")


def _facts(pci: tuple[PciFact, ...] = (), sources: tuple[PciSource, ...] = (SYSFS,), **tools: str | None) -> NodeFacts:
    return NodeFacts(
        "node001", None, None, None, None, None, None, None, None, pci=pci, pci_sources=sources, tools=dict(tools)
    )


def _run(stdout: str, exit_code: int = 0, stderr: str = ""):
    def run(probe: Probe) -> CommandResult:
        return CommandResult(
            node="node001", command=probe.tool(), stdout=stdout, stderr=stderr, exit_code=exit_code, duration_s=0.1
        )

    return run


SMI = Probe("smi", command=("nvidia-smi", "-q", "-x"), expects="gpu", parse=nvidia_smi_xml.parse, package=DRIVER)
DCGM = Probe("dcgm", command=("dcgmi", "diag"), expects="gpu", parse=str, package="DCGM, datacenter-gpu-manager")


def test_absence_proven_skips_with_the_bus_words() -> None:
    with pytest.raises(
        ProbeSkip, match=r"^not on this hardware: the PCI bus shows no NVIDIA GPU \(sysfs .*6 functions\)$"
    ):
        read_declared(SMI, _facts(), None, _run(""))


def test_absence_not_proven_is_an_error() -> None:
    unread = PciSource("sysfs /sys/bus/pci/devices", False, reason="permission denied")
    with pytest.raises(ProbeError, match="absence of NVIDIA GPU not proven"):
        read_declared(SMI, _facts(sources=(unread,)), None, _run(""))


def test_any_of_several_kinds_names_them_all() -> None:
    probe = Probe("pcie", command=("sh", "-c", "true"), expects=("gpu", "hca"), parse=str)
    with pytest.raises(ProbeSkip) as info:
        require_declared(probe, _facts(), None)
    assert str(info.value) == (
        "not on this hardware: the PCI bus shows no NVIDIA GPU and no RDMA NIC (vendor 15b3) "
        "(sysfs /sys/bus/pci/devices: 6 functions)"
    )
    assert require_declared(probe, _facts((GPU,)), None).what == "NVIDIA GPU"


def test_a_missing_tool_is_an_error_naming_its_package_but_the_drivers_tool_runs() -> None:
    with pytest.raises(ProbeError, match=r"dcgmi not found on the node's PATH \(DCGM, datacenter-gpu-manager\)"):
        read_declared(DCGM, _facts((GPU,), dcgmi=None), None, _run("x"))
    with pytest.raises(
        UnreportedHardware, match=r"nvidia-smi -q -x cannot report on them: exit 127: sh: nvidia-smi: not found"
    ):
        read_declared(SMI, _facts((GPU,)), None, _run("", 127, "sh: nvidia-smi: not found"))


def test_a_site_tool_the_inventory_does_not_look_for_is_run_not_refused() -> None:
    """The inventory looks for its own TOOLS only: a site's tool absent from facts.tools is
    run (it was refused as 'not found' even when on PATH); the shell not finding it (exit 127)
    is the missing tool's error naming the package, anything else is read as usual."""
    site = Probe("site", command=("site-hca-check",), expects="gpu", parse=nvidia_smi_xml.parse, package="site-tools")
    text = corpus("nvidia-smi/q-x-a100-sxm4-80gb-mig-enabled-v12.xml.txt")
    assert read_declared(site, _facts((GPU,)), None, _run(text)).gpus
    with pytest.raises(ProbeError, match=r"site-hca-check not found on the node's PATH \(site-tools\)") as err:
        read_declared(site, _facts((GPU,)), None, _run("", 127, "sh: 1: site-hca-check: not found"))
    assert err.value.cause == "tool:missing"
    with pytest.raises(UnreportedHardware, match="couldn't communicate with the NVIDIA driver"):
        read_declared(
            site,
            _facts((GPU,)),
            None,
            _run("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.", 9),
        )


def test_the_record_and_the_tools_own_failure() -> None:
    text = corpus("nvidia-smi/q-x-a100-sxm4-80gb-mig-enabled-v12.xml.txt")
    assert read_declared(SMI, _facts((GPU,)), None, _run(text)).gpus
    with pytest.raises(UnreportedHardware, match="Unable to determine the device handle"):
        read_declared(
            SMI,
            _facts((GPU,)),
            None,
            _run("Unable to determine the device handle for GPU 0000:18:00.0: Unknown Error\n"),
        )


def _none_or_parse(text: str) -> str | None:
    if not text.strip():
        return None
    if text.startswith("?"):
        raise ParseError("not the tool's report")
    return text


def test_nothing_reported_is_accepted_from_a_tool_that_exited_0_only() -> None:
    probe = Probe(
        "nv",
        command=("nvidia-smi", "nvlink", "-s"),
        expects="gpu",
        parse=_none_or_parse,
        package=DRIVER,
        stdout_only=True,
    )
    assert read_declared(probe, _facts((GPU,)), None, _run("", 0, "a warning")) is None
    with pytest.raises(UnreportedHardware, match=r"nvidia-smi nvlink -s cannot report on them: exit 3: a warning"):
        read_declared(probe, _facts((GPU,)), None, _run("", 3, "a warning"))


def test_skip_if_is_asked_after_the_hardware() -> None:
    probe = Probe(
        "nv",
        command=("nvidia-smi", "nvlink", "-s"),
        expects="gpu",
        parse=str,
        package=DRIVER,
        skip_if=lambda sku: "PCIe SKU without NVLink",
    )
    with pytest.raises(ProbeSkip, match="PCI bus shows no NVIDIA GPU"):
        require_declared(probe, _facts(), None)
    with pytest.raises(ProbeSkip, match="PCIe SKU without NVLink"):
        require_declared(probe, _facts((GPU,)), None)


def test_a_probe_without_a_declaration_is_a_checks_mistake() -> None:
    with pytest.raises(TypeError, match="no parse="):
        read_declared(Probe("x", command=("ibstat",)), _facts(), None, _run(""))
    with pytest.raises(TypeError, match="no expects="):
        read_declared(Probe("x", command=("ibstat",), parse=str), _facts(), None, _run(""))
