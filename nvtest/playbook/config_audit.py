"""The Playbook's next steps for the configuration audit (``suites/config/``).

:data:`REMEDIATION` holds the text each audit finding carries as its remediation;
:data:`CONFIG_CHECKS` gives each audit check's diagnosis (cause, action, class) for a
failing result, which :func:`nvtest.playbook.diagnosis.diagnose` uses before its generic
rules. nvtest never applies any of these itself: it is read-only on nodes.

Sources: NCCL's troubleshooting guide (PCI Access Control Services, IOMMU, GPU Direct
RDMA, ``NCCL_SOCKET_IFNAME``), NVIDIA's driver documentation (nvidia-peermem, persistence
daemon), the Linux kernel's ``Documentation/ABI/testing/sysfs-kernel-iommu_groups``.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CONFIG_CHECKS", "REMEDIATION", "ConfigAction"]

REMEDIATION: dict[str, str] = {
    "acs_redirect": (
        "disable ACS on the PCIe switch ports: in the BIOS (PCIe ACS control -> Disabled), or "
        "at runtime `setpci -s {bdf} ECAP_ACS+0x6.w=0000` as root (lost at reboot), then reboot "
        "or re-run; ACS is wanted only in VMs with device passthrough"
    ),
    "acs_source_validation": (
        "ACS source validation does not redirect peer traffic by itself; clear it with the "
        "other ACS bits (BIOS, or `setpci -s {bdf} ECAP_ACS+0x6.w=0000`) if P2P bandwidth is low"
    ),
    "acs_unreadable": (
        "run the audit as root (lspci reads the extended capabilities only as root: "
        "`Capabilities: <access denied>` otherwise), or install pciutils"
    ),
    "iommu_translated": (
        "set iommu=pt on the kernel command line (GRUB_CMDLINE_LINUX, update-grub, reboot), or "
        "turn the IOMMU off (intel_iommu=off / amd_iommu=off, or VT-d / AMD-Vi in the BIOS) "
        "where no VM passthrough is needed"
    ),
    "iommu_unknown": (
        "check the IOMMU mode: a kernel >= 5.11 shows it in /sys/kernel/iommu_groups/*/type; "
        "on an older kernel set iommu=pt explicitly on the kernel command line"
    ),
    "numa_unknown": (
        "enable NUMA reporting in the BIOS (ACPI SRAT; NPS / sub-NUMA clustering settings) and "
        "update the BIOS: without a NUMA node neither NCCL nor a CPU binding can place ranks "
        "next to the device"
    ),
    "numa_far": (
        "give the processes CPUs local to every GPU and NIC: widen the allocation's CPU set "
        "(Slurm --exclusive, or more --cpus-per-task), or check the cgroup cpuset of the "
        "login/launch path"
    ),
    "peermem_missing": (
        "load nvidia-peermem (`modprobe nvidia-peermem`; persistent: "
        "/etc/modules-load.d/nvidia-peermem.conf); it ships with the NVIDIA driver >= 470 and "
        "needs MLNX_OFED installed before the driver. Without it NCCL falls back to copies "
        "through host memory (no GDRDMA) unless it can use DMA-BUF"
    ),
    "nvidia_missing": (
        "load the NVIDIA driver (`modprobe nvidia`; check `dmesg` for why it did not load) "
        "before GPUDirect RDMA can work"
    ),
    "persistence_off": (
        "enable the persistence daemon (`systemctl enable --now nvidia-persistenced`) or "
        "`nvidia-smi -pm 1`: an operator's choice; nvtest never sets it"
    ),
    "persistence_mixed": (
        "make persistence mode the same on every GPU (nvidia-persistenced manages all GPUs); "
        "an operator's choice; nvtest never sets it"
    ),
    "persistence_unreadable": (
        "fix nvidia-smi on this node (driver loaded, NVML matches the kernel module); the GPU "
        "is on the PCI bus and must answer"
    ),
    "package_fleet": (
        "install the fleet's version of {package} (pin it: apt-mark hold / dnf versionlock) "
        "or re-image the node; then reboot and re-run"
    ),
    "package_after_image": (
        "{package} changed after the image was built: re-image the node, or fold the change "
        "into the image and roll it to the fleet"
    ),
    "package_after_boot": (
        "{package} changed after the running kernel booted: reboot so the running kernel and "
        "modules are the installed ones, then re-run"
    ),
    "driver_module_mismatch": (
        "the NVIDIA kernel module loaded at boot differs from the installed driver package "
        "(NVML fails with 'Driver/library version mismatch'): reboot, and pin the driver "
        "packages so unattended upgrades cannot move them"
    ),
    "no_package_tool": "install dpkg-query or rpm, or audit the packages by hand",
    "nccl_bridge": (
        "set the node's socket_ifname in the inventory (nvtest passes NCCL_SOCKET_IFNAME=={name}) "
        "or NCCL_SOCKET_IFNAME, so NCCL never uses a container or VM bridge"
    ),
    "nccl_outside_networks": (
        "set socket_ifname in the inventory to the interface on the node's networks, or "
        "correct the node's networks: in the inventory"
    ),
    "nccl_no_interface": (
        "the interface named by NCCL_SOCKET_IFNAME is absent, down or has no address: fix the "
        "inventory's socket_ifname or bring the interface up"
    ),
    "nccl_networks_undeclared": (
        "declare the node's networks: (CIDR) in the inventory so the interface NCCL uses can be judged"
    ),
    "nccl_hca_missing": (
        "fix the inventory's ib_hca: NCCL_IB_HCA=={name} names no HCA of this node, so NCCL falls back to sockets"
    ),
    "ip_unreadable": "install iproute2 (`ip -j`, iproute2 >= 4.13) on the node",
    "rank_on_host": (
        "the rank ran outside the container: check the container plugin on that node "
        "(plugstack.conf lists pyxis; `srun --container-image` accepted; enroot installed) "
        "and that the image carries its marker (/etc/nvtest-image-id or NVTEST_IMAGE_ID)"
    ),
    "rank_wrong_image": (
        "the rank ran in another image than the run asked for: check --container-image, the "
        "enroot cache on that node, and the image's /etc/nvtest-image-id"
    ),
    "rank_missing": (
        "the rank printed no identity: read the step's log for the node (container start, "
        "enroot hooks, srun task launch) and re-run"
    ),
}


@dataclass(frozen=True)
class ConfigAction:
    """The diagnosis of a failing audit check: cause, action and class (``CONFIG`` etc.)."""

    cause: str
    action: str
    cls: str


CONFIG_CHECKS: dict[str, ConfigAction] = {
    "pcie_acs": ConfigAction(
        "PCIe ACS redirects peer-to-peer traffic between GPUs and NICs through the root complex "
        "(low P2P/GDRDMA bandwidth, NCCL hangs)",
        REMEDIATION["acs_redirect"].format(bdf="<bridge>"),
        "CONFIG",
    ),
    "iommu": ConfigAction(
        "the IOMMU translates DMA of GPUs and NICs (P2P and GPUDirect RDMA slow or failing)",
        REMEDIATION["iommu_translated"],
        "CONFIG",
    ),
    "numa_affinity": ConfigAction(
        "GPUs or NICs have no NUMA node, or the harness's processes cannot run near them",
        REMEDIATION["numa_unknown"] + "; " + REMEDIATION["numa_far"],
        "CONFIG",
    ),
    "gpudirect_rdma": ConfigAction(
        "GPUDirect RDMA is not available (nvidia-peermem not loaded)",
        REMEDIATION["peermem_missing"],
        "CONFIG",
    ),
    "persistence_mode": ConfigAction(
        "GPU persistence mode is not as the fleet runs it, or nvidia-smi cannot report it",
        REMEDIATION["persistence_off"],
        "CONFIG",
    ),
    "package_drift": ConfigAction(
        "the kernel or driver packages differ from the fleet, the boot or the image",
        "re-image the node or install the fleet's pinned versions; reboot; re-run",
        "CONFIG",
    ),
    "nccl_interfaces": ConfigAction(
        "NCCL's bootstrap or socket traffic uses a bridge or an interface outside the node's networks",
        REMEDIATION["nccl_bridge"].format(name="<interface>"),
        "CONFIG",
    ),
    "container_identity": ConfigAction(
        "a rank did not run in the run's container image",
        REMEDIATION["rank_on_host"],
        "CONFIG",
    ),
}
