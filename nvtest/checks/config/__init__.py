"""The Playbook's configuration audit: pure functions from probe and tool output to an Outcome.

Every finding names its **source** (the file or command it was read from) and, when it
fails or warns, its **remediation** (the Playbook's next step, from
:mod:`nvtest.playbook.config_audit`). The checks in ``suites/config/`` run the ``config``
probe (``nvtest/probes/config_probe.py``) once per node and hand its document to these
functions; the tests call the same functions on recorded outputs.

==================  ==================================================================
module              checks
==================  ==================================================================
``platform``        the probe document as typed records (PCI functions, bridges, NUMA)
``acs``             ``pcie_acs``: ACS redirect on the PCIe bridges between GPUs and NICs
``iommu``           ``iommu``: the IOMMU mode of every GPU's and NIC's group
``numa``            ``numa_affinity``: each GPU's and NIC's NUMA node vs the harness's CPUs
``gpudirect``       ``gpudirect_rdma``: nvidia-peermem where GPUs and RDMA NICs meet
``persistence``     ``persistence_mode``: nvidia-smi's persistence mode of every GPU
``packages``        ``package_drift``: kernel and driver packages vs the fleet, the boot
                    and the image
``network``         ``nccl_interfaces``: the interfaces NCCL picks (predicted and seen)
``container``       ``container_identity``: every rank's image marker under Slurm
==================  ==================================================================

Fail closed (DESIGN.md): hardware the PCI bus shows is expected; a tool that cannot
report on it is a failure with the tool's words; a skip says which source proved the
hardware absent.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

from nvtest.checks.health import Outcome

__all__ = ["ConfigFinding", "Severity", "absent", "record"]

Severity = Literal["fail", "warn", "note"]


@dataclass(frozen=True)
class ConfigFinding:
    """One audit finding.

    Attributes:
        severity: ``fail`` fails the item, ``warn`` warns it, ``note`` is shown only.
        message: what was found, naming the device or interface.
        source: where it was read (``/sys/bus/pci/devices/0000:04:00.0/numa_node``,
            ``lspci -D -vvv``).
        remediation: the Playbook's next step; required for ``fail`` and ``warn``.
    """

    severity: Severity
    message: str
    source: str
    remediation: str | None = None

    def __post_init__(self) -> None:
        if self.severity != "note" and not self.remediation:
            raise ValueError(f"a {self.severity} finding needs a remediation: {self.message}")
        if not self.source:
            raise ValueError(f"a finding needs a source: {self.message}")

    def text(self) -> str:
        """``message (source: ...; next: ...)``: the line shown in the report."""
        nxt = f"; next: {self.remediation}" if self.remediation and self.severity != "note" else ""
        return f"{self.message} (source: {self.source}{nxt})"


def record(out: Outcome, finding: ConfigFinding) -> None:
    """Add ``finding`` to ``out`` (failures, warnings or notes) and to ``details["findings"]``."""
    if finding.severity == "fail":
        out.fail(finding.text())
    elif finding.severity == "warn":
        out.warn(finding.text())
    else:
        out.note(finding.text())
    findings = out.details.setdefault("findings", [])
    findings.append(asdict(finding))


def absent(out: Outcome, what: str, source: str, consequence: str | None = None) -> Outcome:
    """Skip ``out``: the PCI bus shows ``what`` (``no NVIDIA GPU``), and ``source`` is the
    reading that proved it; worded as every check's skip for absent hardware ("not on this
    hardware: the PCI bus shows no ...")."""
    then = f": {consequence}" if consequence else ""
    out.skip = f"not on this hardware: the PCI bus shows {what}{then} ({source})"
    return out
