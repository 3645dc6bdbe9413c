"""Node facts from the inventory probe's raw tool output (recorded real outputs)."""

from __future__ import annotations

from nvtest.session.facts import facts_from_probe
from tests.conftest import CORPUS


def _doc(lspci: str = "", smi_xml: str = "", smi_reason: str | None = "nvidia-smi not found on PATH") -> dict:
    return {
        "probe": "inventory",
        "host": "node001",
        "cpu": {"model": "x", "sockets": 2, "cores": 64, "threads": 128},
        "memory": {"total_kib": 2 * 1024**3},
        "os": {"pretty_name": "Ubuntu 22.04", "kernel": "5.15"},
        "python": {"version": "3.10", "libraries": {}},
        "tools": {},
        "raw": {
            "lspci": {"stdout": lspci, "rc": 0, "reason": None},
            "nvidia-smi-xml": {"stdout": smi_xml, "rc": 0 if smi_xml else None, "reason": None if smi_xml else smi_reason},
        },
    }


def test_no_gpu_reason_names_both_sources():
    f = facts_from_probe(_doc())
    assert f.gpus == () and f.gpu_summary().count == 0
    assert f.gpu_absent_reason == "no NVIDIA GPU: lspci lists no 10de display device, nvidia-smi not found on PATH"


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


def test_nvidia_smi_failure_is_the_absent_reason_in_the_tools_words():
    text = (CORPUS / "nvidia-smi" / "plain-nvml-driver-library-version-mismatch-570.txt").read_text()
    f = facts_from_probe(_doc(smi_xml=text))
    assert f.gpus == ()
    assert f.gpu_absent_reason == "nvidia-smi -q -x failed: Failed to initialize NVML: Driver/library version mismatch"
