"""Node facts from the inventory probe, run for real on stand-in nodes (recorded real outputs).

Rule 1 (fail closed) over every node profile: what a node is comes from the PCI bus; a bus
that shows NVIDIA GPUs makes them expected (and picks the SKU) whatever nvidia-smi says, and
absence is proven only by a bus that was read.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from nvtest.config.skus import load_catalog
from nvtest.session.facts import NodeFacts, facts_from_json, facts_from_probe
from nvtest.testing.standin_nodes import PROFILES, install
from tests.conftest import CORPUS, PROBES

#: profile -> the words of nvidia-smi its facts must carry (None: it reports every GPU).
SMI_WORDS = {
    "h100_driver_down": "couldn't communicate with the NVIDIA driver",
    "h100_nvml_mismatch": "Driver/library version mismatch",
    "h100_gpu_lost": "cannot reach GPU 0000:DF:00.0",
}


def probe_facts(profile: str, tmp_path: Path, env: dict[str, str] | None = None) -> NodeFacts:
    """Run the real inventory probe with ``profile``'s stand-ins first on PATH (plus ``env``)."""
    tools = install(profile, tmp_path / "bin")
    proc = subprocess.run(
        [sys.executable, str(PROBES / "inventory_probe.py")],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": tools.path_prefix(), **(env or {})},
    )
    assert proc.returncode == 0, proc.stderr
    return facts_from_probe(json.loads(proc.stdout))


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_every_profile_is_what_its_bus_shows(profile, tmp_path, catalog):
    facts = probe_facts(profile, tmp_path)
    match = catalog.match(facts.gpu_summary())
    assert any(s.name.startswith("sysfs") and s.read for s in facts.pci_sources), facts.pci_sources
    if profile == "cpu_only":
        assert facts.expected_gpus == 0 and facts.gpu_absence
        assert "sysfs /sys/bus/pci/devices" in facts.gpu_absence and "lspci" in facts.gpu_absence
        assert match.name == "cpu-generic" and "PCI bus shows no NVIDIA GPU" in match.reasons[0]
        return
    assert len(facts.bus("gpu")) == 8 and len(facts.bus("nvswitch")) == 4
    assert facts.expected_gpus == 8 and facts.gpu_absence is None and facts.gpu_absent_reason is None
    # never the CPU profile: the bus identifies the SKU even when nvidia-smi says nothing
    assert match.name == "h100-sxm-80gb", match.reasons
    assert any("PCI bus: 8 x 10de:2330" in r for r in match.reasons)
    words = SMI_WORDS.get(profile)
    if words is None:
        assert len(facts.gpus) == 8 and facts.smi_error is None and facts.driver_version == "565.57.01"
    else:
        assert facts.smi_error and words in facts.smi_error, facts.smi_error


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_facts_read_back_from_results_json_are_the_same(profile, tmp_path):
    """``nvtest evaluate`` judges a stored run from ``nodes.*.inventory``: every field of the
    facts (the PCI bus readings included) must come back as it was recorded."""
    facts = probe_facts(profile, tmp_path)
    doc = json.loads(json.dumps(facts.to_json()))
    assert facts_from_json(doc) == facts
    assert facts_from_json({**doc, "field_of_a_newer_nvtest": 1}) == facts


def test_the_probe_records_the_environment_and_binding(tmp_path):
    env = {"NCCL_SOCKET_IFNAME": "eth0", "UCX_NET_DEVICES": "mlx5_0:1", "HOME": str(tmp_path)}
    facts = probe_facts("cpu_only", tmp_path, env)
    assert "HOME" not in facts.environment
    assert facts.environment["NCCL_SOCKET_IFNAME"] == "eth0"
    assert facts.environment["UCX_NET_DEVICES"] == "mlx5_0:1"
    assert facts.cpu_affinity and facts.net_interfaces


def _doc(lspci: str = "", smi_xml: str = "", pci_sysfs: dict | None = None) -> dict:
    return {
        "probe": "inventory",
        "host": "node001",
        "cpu": {"model": "x", "sockets": 2, "cores": 64, "threads": 128},
        "memory": {"total_kib": 2 * 1024**3},
        "os": {"pretty_name": "Ubuntu 22.04", "kernel": "5.15"},
        "python": {"version": "3.10", "libraries": {}},
        "tools": {},
        "pci_sysfs": pci_sysfs,
        "raw": {
            "lspci": {"stdout": lspci, "rc": 0, "reason": None},
            "nvidia-smi-xml": {
                "stdout": smi_xml,
                "rc": 0 if smi_xml else None,
                "reason": None if smi_xml else "nvidia-smi not found on PATH",
            },
        },
    }


def test_an_unread_bus_proves_nothing(catalog):
    facts = facts_from_probe(_doc(pci_sysfs={"path": "/sys/bus/pci/devices", "devices": [], "reason": "cannot read"}))
    assert facts.gpu_absence is None and "not proven" in (facts.gpu_absent_reason or "")
    match = catalog.match(facts.gpu_summary())
    assert match.profile is None and "absence unproven" in match.reasons[0]


def test_an_empty_sysfs_bus_and_a_failed_lspci_prove_nothing(catalog):
    """A masked /sys/bus/pci/devices (a container: the directory is there, empty) lists no
    function at all, not even a host bridge; with lspci failing too, GPU absence is not proven
    (the checks say error, never skip), and lspci's stderr is kept as its words."""
    doc = _doc(pci_sysfs={"path": "/sys/bus/pci/devices", "devices": [], "reason": None})
    doc["raw"]["lspci"] = {"stdout": "", "stderr": "pcilib: Cannot open /sys/bus/pci/devices", "rc": 1, "reason": None}
    facts = facts_from_probe(doc)
    assert not facts.bus_read and facts.gpu_absence is None
    assert "not proven" in (facts.gpu_absent_reason or "")
    assert "listed no PCI function" in facts.bus_text()
    assert "exit 1: pcilib: Cannot open /sys/bus/pci/devices" in facts.bus_text()


def test_gpus_from_recorded_xml():
    xml = (CORPUS / "nvidia-smi" / "q-x-a100-sxm4-80gb-mig-enabled-v12.xml.txt").read_text()
    f = facts_from_probe(_doc(smi_xml=xml))
    assert f.gpus, "no GPU read from the recorded XML"
    g = f.gpus[0]
    assert "A100" in g.name and g.memory_mib and g.memory_mib > 80000
    assert g.mig_mode is not None and g.mig_mode.lower() == "enabled"
    assert f.driver_version and f.cuda_version
    assert f.gpu_absent_reason is None
    summary = f.gpu_summary()
    assert summary.count == len(f.gpus) and summary.memory_mib[0] == g.memory_mib


def test_nvidia_smi_failure_is_kept_in_the_tools_words():
    text = (CORPUS / "nvidia-smi" / "plain-nvml-driver-library-version-mismatch-570.txt").read_text()
    f = facts_from_probe(_doc(smi_xml=text))
    assert f.gpus == ()
    # nvidia-smi's own words are kept; they prove nothing about the bus (fail closed)
    assert f.smi_error and f.smi_error.startswith("nvidia-smi -q -x")
    assert "Failed to initialize NVML: Driver/library version mismatch" in f.smi_error
    assert f.gpu_absent_reason and f.gpu_absent_reason.startswith("GPU absence not proven")
