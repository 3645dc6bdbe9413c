"""``iommu``: the IOMMU mode of every GPU's and RDMA NIC's IOMMU group.

An IOMMU that translates DMA (``DMA``/``DMA-FQ`` domains) puts every GPU-to-GPU and
GPU-to-NIC transfer through address translation: P2P and GPUDirect RDMA slow down or
fail (NCCL troubleshooting guide, "IOMMU"). Bare metal wants passthrough (``iommu=pt``,
an ``identity`` domain) or no IOMMU at all.

Sources, in order:

1. ``/sys/bus/pci/devices/<bdf>/iommu_group/type`` (kernel >= 5.11:
   ``identity``, ``DMA``, ``DMA-FQ``, ``blocked``): the mode the kernel actually uses;
2. no ``iommu_group`` and no group in ``/sys/kernel/iommu_groups``: the IOMMU is off;
3. a group without a ``type`` file (older kernel): ``/proc/cmdline`` must say
   ``iommu=pt``, ``iommu.passthrough=1``, ``intel_iommu=off`` or ``amd_iommu=off``;
   otherwise the mode is not proven: **fail** (fail closed).

``identity`` or off: pass. ``DMA``/``DMA-FQ``/``blocked``: **fail**. No GPU or NIC: skip.
"""

from __future__ import annotations

from nvtest.checks.config import ConfigFinding, absent, record
from nvtest.checks.config.platform import Platform, bus_source
from nvtest.checks.health import Outcome
from nvtest.playbook.config_audit import REMEDIATION

__all__ = ["PASSTHROUGH_ARGS", "cmdline_mode", "iommu_mode"]

#: Kernel arguments that leave devices untranslated (passthrough or IOMMU off).
PASSTHROUGH_ARGS = ("iommu=pt", "iommu.passthrough=1", "intel_iommu=off", "amd_iommu=off", "iommu=off")
TRANSLATED_TYPES = ("DMA", "DMA-FQ", "blocked")


def cmdline_mode(cmdline: str | None) -> str | None:
    """The passthrough/off argument on the kernel command line, or None."""
    args = (cmdline or "").split()
    for a in args:
        if a in PASSTHROUGH_ARGS:
            return a
    return None


def iommu_mode(p: Platform) -> Outcome:
    """Judge the IOMMU mode of each GPU and NIC (see the module doc)."""
    out = Outcome()
    if not p.devices:
        return absent(out, "no NVIDIA GPU and no RDMA NIC", bus_source(p))
    arg = cmdline_mode(p.cmdline)
    modes: dict[str, str] = {}
    for d in p.devices:
        src = p.sysfs("sys/bus/pci/devices", d.bdf, "iommu_group/type")
        if d.iommu_group is None:
            if p.iommu_groups:
                record(
                    out,
                    ConfigFinding(
                        "fail",
                        f"{d.label}: no IOMMU group while {p.iommu_groups} groups exist",
                        p.sysfs("sys/bus/pci/devices", d.bdf, "iommu_group"),
                        REMEDIATION["iommu_unknown"],
                    ),
                )
                modes[d.bdf] = "unknown"
            else:
                modes[d.bdf] = "off"
            continue
        if d.iommu_group_type:
            modes[d.bdf] = d.iommu_group_type
            if d.iommu_group_type in TRANSLATED_TYPES:
                record(
                    out,
                    ConfigFinding(
                        "fail",
                        f"{d.label}: IOMMU group {d.iommu_group} translates DMA (type {d.iommu_group_type})",
                        src,
                        REMEDIATION["iommu_translated"],
                    ),
                )
            continue
        if arg:
            modes[d.bdf] = f"passthrough ({arg})"
            continue
        modes[d.bdf] = "unknown"
        record(
            out,
            ConfigFinding(
                "fail",
                f"{d.label}: in IOMMU group {d.iommu_group}, and neither the group's type "
                "nor the kernel command line proves passthrough",
                f"{src} (absent), {p.sysfs('proc/cmdline')}",
                REMEDIATION["iommu_unknown"],
            ),
        )
    if all(m == "off" for m in modes.values()):
        record(out, ConfigFinding("note", "IOMMU off: no IOMMU group on this node", p.sysfs("sys/kernel/iommu_groups")))
    elif not out.failures:
        record(
            out,
            ConfigFinding(
                "note", "IOMMU in passthrough for every GPU and NIC", p.sysfs("sys/kernel/iommu_groups/*/type")
            ),
        )
    out.details["iommu"] = {
        "modes": modes,
        "cmdline_arg": arg,
        "groups": p.iommu_groups,
        "iommu_classes": list(p.iommu_classes),
    }
    return out
