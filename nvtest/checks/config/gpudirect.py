"""``gpudirect_rdma``: nvidia-peermem where the node has NVIDIA GPUs and RDMA NICs.

GPUDirect RDMA lets the NIC read and write GPU memory directly; on the MLNX_OFED/inbox
stack it needs the ``nvidia_peermem`` kernel module (NVIDIA driver >= 470; before that
Mellanox's ``nv_peer_mem``). Without it NCCL's IB transport stages through host memory
(no ``GDRDMA`` in its channel lines) unless it can use DMA-BUF.

Sources: ``/sys/module/nvidia_peermem`` (and ``nv_peer_mem``, ``nvidia``), the GPUs and
NICs in ``/sys/bus/pci/devices``.

Verdicts: GPUs and RDMA NICs present, ``nvidia_peermem`` (or ``nv_peer_mem``) loaded:
pass; not loaded: **fail**; the ``nvidia`` module itself not loaded: **fail**. No GPU or
no RDMA NIC on the bus: skip, naming sysfs.
"""

from __future__ import annotations

from nvtest.checks.config import ConfigFinding, absent, record
from nvtest.checks.config.platform import Platform, bus_source
from nvtest.checks.health import Outcome
from nvtest.playbook.config_audit import REMEDIATION

__all__ = ["gpudirect_rdma"]


def gpudirect_rdma(p: Platform) -> Outcome:
    """Judge GPUDirect RDMA's kernel side (see the module doc)."""
    out = Outcome()
    if not p.gpus or not p.nics:
        missing = "NVIDIA GPU" if not p.gpus else "RDMA NIC"
        return absent(out, f"no {missing}", bus_source(p), "GPUDirect RDMA does not apply")
    if not p.module_loaded("nvidia"):
        record(
            out,
            ConfigFinding(
                "fail",
                f"{len(p.gpus)} NVIDIA GPU(s) on the bus but the nvidia kernel module is not loaded",
                p.sysfs("sys/module/nvidia"),
                REMEDIATION["nvidia_missing"],
            ),
        )
    if p.module_loaded("nvidia_peermem"):
        version = (p.modules.get("nvidia_peermem") or {}).get("version")
        record(
            out,
            ConfigFinding(
                "note",
                f"nvidia_peermem loaded{' (' + version + ')' if version else ''}",
                p.sysfs("sys/module/nvidia_peermem"),
            ),
        )
    elif p.module_loaded("nv_peer_mem"):
        record(
            out,
            ConfigFinding("note", "nv_peer_mem (Mellanox's legacy module) loaded", p.sysfs("sys/module/nv_peer_mem")),
        )
    else:
        record(
            out,
            ConfigFinding(
                "fail",
                f"nvidia_peermem not loaded: {len(p.gpus)} GPU(s) and {len(p.nics)} RDMA NIC(s) without GPUDirect RDMA",
                p.sysfs("sys/module/nvidia_peermem") + " (absent)",
                REMEDIATION["peermem_missing"],
            ),
        )
    out.details["gpudirect"] = {
        "nvidia_peermem": p.module_loaded("nvidia_peermem"),
        "nv_peer_mem": p.module_loaded("nv_peer_mem"),
        "nvidia": (p.modules.get("nvidia") or {}).get("version"),
        "gpus": len(p.gpus),
        "rdma_nics": len(p.nics),
    }
    return out
