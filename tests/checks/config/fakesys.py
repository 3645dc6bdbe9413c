"""Fake sysfs/procfs roots for the ``config`` probe (its ``--sysfs-root`` test seam).

:func:`build` writes, under a directory, the files the probe reads on a node
(``sys/bus/pci/devices`` as symlinks into ``sys/devices/pci0000:xx/...``, ``numa_node``,
``local_cpulist``, ``iommu_group`` -> ``sys/kernel/iommu_groups/N`` with its ``type``,
``sys/module/*``, ``sys/class/infiniband/*``, ``sys/devices/system/node/node*/cpulist``,
``proc/self/status``, ``proc/cmdline``, ``proc/stat``, ``proc/sys/kernel/osrelease``,
``etc/nvtest-image-id``), and :func:`lspci_vvv` the ``lspci -D -vvv`` text of the same
machine for a stand-in ``lspci``.

Two machines from recorded values (tests/data/config/INDEX.md):

- :func:`titanx_plx`: the PCIe tree of ``lspci -tv`` in the public post "PCIe 和 lspci"
  (4 GP102 TITAN X behind two PLX PEX 8747 switches, one NUMA node, ``NUMA node: 0``);
- :func:`a100_topo`: the ``nvidia-smi topo -m`` of tests/data/corpus/nvidia-smi/
  topo-m-a100x8-18nics-8numa.txt (8 GPUs, 18 mlx5 NICs, 8 NUMA nodes of 16 CPUs; GPU and
  NIC pairs PXB behind one switch, NIC pairs PIX); its BDFs are assigned, the topology,
  NUMA nodes and CPU ranges are the recording's.

The ACS lines come from real ``lspci -vvv`` output (PLX PEX 8747 downstream port, ACS
off; NVIDIA/nccl#304's "broken state" line, ACS on; ROCm/rccl#547's root port).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from tests.conftest import DATA

CONFIG_DATA = DATA / "config"

_acs = (CONFIG_DATA / "lspci-grep-acsctl-plx-enabled-vs-disabled-nccl304.txt").read_text().splitlines()
#: ``ACSCtl`` of PLX switch ports with ACS enabled / disabled (NVIDIA/nccl#304).
ACS_ON = _acs[1].strip()
ACS_OFF = _acs[3].strip()
#: ``ACSCap`` of the PEX 8747 downstream port (the "PCIe 和 lspci" post).
ACS_CAP = "ACSCap: SrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl+ DirectTrans+"


@dataclass
class Dev:
    """One audited function: its sysfs values and the bridges above it (root port first)."""

    bdf: str
    vendor: str
    device: str
    cls: str
    path: tuple[str, ...]
    numa_node: int = 0
    local_cpulist: str | None = None
    driver: str | None = None
    name: str = ""


@dataclass
class Bridge:
    """A PCIe bridge: ids, port type and ``ACSCtl`` line (None: no ACS capability)."""

    bdf: str
    vendor: str
    device: str
    name: str
    port: str
    acsctl: str | None = ACS_OFF


@dataclass
class Machine:
    """Everything the probe reads on one node."""

    devices: list[Dev]
    bridges: dict[str, Bridge]
    numa_nodes: dict[int, str]
    cpus_allowed: str
    cmdline: str = "BOOT_IMAGE=/boot/vmlinuz root=/dev/sda1 ro quiet"
    iommu: str = "off"  # off | identity | DMA-FQ | untyped (groups without a type file)
    modules: dict[str, str | None] = field(default_factory=lambda: {"nvidia": "535.104.05"})
    infiniband: list[str] = field(default_factory=list)
    osrelease: str = "5.15.0-105-generic"
    btime: int = 1_714_000_000
    image: tuple[str, int] | None = ("rack07-2024.04", 1_713_000_000)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + ("\n" if text and not text.endswith("\n") else ""))


def build(root: Path, m: Machine) -> Path:
    """Write ``m`` under ``root`` (created); return ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    bus = root / "sys/bus/pci/devices"
    bus.mkdir(parents=True, exist_ok=True)
    groups = root / "sys/kernel/iommu_groups"
    if m.iommu != "off":
        groups.mkdir(parents=True, exist_ok=True)
    written: set[str] = set()
    for i, d in enumerate(m.devices):
        chain = [*d.path, d.bdf]
        where = root / "sys/devices" / f"pci{d.bdf[:4]}:{d.path[0][5:7] if d.path else d.bdf[5:7]}"
        for b in chain:
            where = where / b
            if b in m.bridges and b not in written:
                written.add(b)
                br = m.bridges[b]
                _write(where / "vendor", br.vendor)
                _write(where / "device", br.device)
                _write(where / "class", "0x060400")
        _write(where / "vendor", d.vendor)
        _write(where / "device", d.device)
        _write(where / "class", d.cls)
        _write(where / "numa_node", str(d.numa_node))
        if d.local_cpulist is not None:
            _write(where / "local_cpulist", d.local_cpulist)
        if d.driver:
            drv = root / "sys/bus/pci/drivers" / d.driver
            drv.mkdir(parents=True, exist_ok=True)
            (where / "driver").symlink_to(drv)
        if m.iommu != "off":
            g = groups / str(i + 10)
            g.mkdir(parents=True, exist_ok=True)
            if m.iommu != "untyped":
                _write(g / "type", m.iommu)
            (where / "iommu_group").symlink_to(g)
        link = bus / d.bdf
        if not link.exists():
            link.symlink_to(where)
    for n, cpus in m.numa_nodes.items():
        _write(root / f"sys/devices/system/node/node{n}/cpulist", cpus)
    (root / "sys/class/iommu").mkdir(parents=True, exist_ok=True)
    for name, version in m.modules.items():
        mod = root / "sys/module" / name
        mod.mkdir(parents=True, exist_ok=True)
        if version:
            _write(mod / "version", version)
    for hca in m.infiniband:
        (root / "sys/class/infiniband" / hca).mkdir(parents=True, exist_ok=True)
    _write(root / "proc/self/status", f"Name:\tpython3\nCpus_allowed_list:\t{m.cpus_allowed}\n")
    _write(root / "proc/cmdline", m.cmdline)
    _write(root / "proc/stat", f"cpu  1 2 3 4\nbtime {m.btime}\n")
    _write(root / "proc/sys/kernel/osrelease", m.osrelease)
    if m.image:
        marker = root / "etc/nvtest-image-id"
        _write(marker, m.image[0])
        os.utime(marker, (m.image[1], m.image[1]))
    return root


def lspci_vvv(m: Machine) -> str:
    """``lspci -D -vvv`` of ``m``'s bridges and devices: header, Express port and ACS lines."""
    out = []
    for b in sorted(m.bridges.values(), key=lambda x: x.bdf):
        lines = [
            f"{b.bdf} PCI bridge: {b.name} (prog-if 00 [Normal decode])",
            f"\tCapabilities: [68] Express (v2) {b.port} (Slot+), MSI 00",
        ]
        if b.acsctl is not None:
            lines += ["\tCapabilities: [f24 v1] Access Control Services", f"\t\t{ACS_CAP}", f"\t\t{b.acsctl}"]
        lines.append("\tKernel driver in use: pcieport")
        out.append("\n".join(lines))
    for d in m.devices:
        out.append(
            f"{d.bdf} {d.name}\n\tCapabilities: [78] Express (v2) Endpoint, MSI 00\n\tKernel driver in use: {d.driver or '-'}"
        )
    return "\n\n".join(out) + "\n"


def lspci_access_denied(m: Machine) -> str:
    """``lspci -D -vvv`` as a non-root user prints it: ``Capabilities: <access denied>``."""
    return (
        "\n\n".join(
            f"{b.bdf} PCI bridge: {b.name}\n\tCapabilities: <access denied>\n\tKernel driver in use: pcieport"
            for b in sorted(m.bridges.values(), key=lambda x: x.bdf)
        )
        + "\n"
    )


TITANX = "VGA compatible controller: NVIDIA Corporation GP102 [TITAN X] (rev a1)"
PEX8747 = "PLX Technology, Inc. PEX 8747 48-Lane, 5-Port PCI Express Gen 3 (8.0 GT/s) Switch (rev ca)"
XEON_RP = "Intel Corporation Xeon E7 v4/Xeon E5 v4/Xeon E3 v4/Xeon D PCI Express Root Port {n} (rev 01)"


def titanx_plx(*, acs: str = ACS_OFF, cpus_allowed: str = "0-15") -> Machine:
    """The "PCIe 和 lspci" machine: 00:02.0 -> 02:00.0 -> 03:{08,10}.0 -> GPUs 04, 05; 00:03.0 -> ... -> 08, 09."""
    bridges = {
        "0000:00:02.0": Bridge("0000:00:02.0", "0x8086", "0x6f04", XEON_RP.format(n=2), "Root Port", None),
        "0000:00:03.0": Bridge("0000:00:03.0", "0x8086", "0x6f08", XEON_RP.format(n=3), "Root Port", None),
    }
    devices = []
    for rp, up, down_bus, gpus in (
        ("0000:00:02.0", "0000:02:00.0", "03", ("04", "05")),
        ("0000:00:03.0", "0000:06:00.0", "07", ("08", "09")),
    ):
        bridges[up] = Bridge(up, "0x10b5", "0x8747", PEX8747, "Upstream Port", acs)
        for port, gpu in zip(("08", "10"), gpus, strict=True):
            down = f"0000:{down_bus}:{port}.0"
            bridges[down] = Bridge(down, "0x10b5", "0x8747", PEX8747, "Downstream Port", acs)
            devices.append(
                Dev(f"0000:{gpu}:00.0", "0x10de", "0x1b00", "0x030000", (rp, up, down), 0, "0-15", "nvidia", TITANX)
            )
    return Machine(devices, bridges, {0: "0-15"}, cpus_allowed)


_NUMA = {0: "0-15", 1: "16-31", 2: "32-47", 3: "48-63", 4: "64-79", 5: "80-95", 6: "96-111", 7: "112-127"}
A100 = "3D controller: NVIDIA Corporation GA100 [A100 SXM4 80GB] (rev a1)"
CX6 = "Infiniband controller: Mellanox Technologies MT28908 Family [ConnectX-6]"


def a100_topo(*, acs: str = ACS_OFF, cpus_allowed: str = "0-127") -> Machine:
    """The topo -m machine: per switch 2 GPUs and 2 dual-port NICs (4 mlx5) on one NUMA node."""
    bridges: dict[str, Bridge] = {}
    devices: list[Dev] = []
    # (numa node, GPU indices, mlx5 indices): from the recording's PXB/PIX and NUMA Affinity columns
    groups = (
        (3, (0, 1), (5, 6, 7, 8)),
        (1, (2, 3), (1, 2, 3, 4)),
        (7, (4, 5), (14, 15, 16, 17)),
        (5, (6, 7), (9, 10, 11, 12)),
    )
    for k, (node, gpus, nics) in enumerate(groups):
        bus = 0x10 + 0x30 * k
        rp, up = f"0000:{bus:02x}:01.1", f"0000:{bus + 1:02x}:00.0"
        bridges[rp] = Bridge(
            rp, "0x1022", "0x1483", "Advanced Micro Devices, Inc. [AMD] Starship/Matisse GPP Bridge", "Root Port", None
        )
        bridges[up] = Bridge(up, "0x10b5", "0x8747", PEX8747, "Upstream Port", acs)
        for j in range(len(gpus)):
            down = f"0000:{bus + 2:02x}:{j:02x}.0"
            bridges[down] = Bridge(down, "0x10b5", "0x8747", PEX8747, "Downstream Port", acs)
            devices.append(
                Dev(
                    f"0000:{bus + 3 + j:02x}:00.0",
                    "0x10de",
                    "0x20b2",
                    "0x030200",
                    (rp, up, down),
                    node,
                    _NUMA[node],
                    "nvidia",
                    A100,
                )
            )
        for j in range(2):
            down = f"0000:{bus + 2:02x}:{2 + j:02x}.0"
            bridges[down] = Bridge(down, "0x10b5", "0x8747", PEX8747, "Downstream Port", acs)
            for f in range(2):
                devices.append(
                    Dev(
                        f"0000:{bus + 5 + j:02x}:00.{f}",
                        "0x15b3",
                        "0x101b",
                        "0x020700",
                        (rp, up, down),
                        node,
                        _NUMA[node],
                        "mlx5_core",
                        CX6,
                    )
                )
        del nics
    for n, bus in ((0, 0xD0), (4, 0xE0)):  # mlx5_0 and mlx5_13: SYS to every GPU, own root port
        rp = f"0000:{bus:02x}:01.1"
        bridges[rp] = Bridge(
            rp, "0x1022", "0x1483", "Advanced Micro Devices, Inc. [AMD] Starship/Matisse GPP Bridge", "Root Port", None
        )
        devices.append(
            Dev(f"0000:{bus + 1:02x}:00.0", "0x15b3", "0x101b", "0x020700", (rp,), n, _NUMA[n], "mlx5_core", CX6)
        )
    return Machine(
        devices,
        bridges,
        dict(_NUMA),
        cpus_allowed,
        modules={"nvidia": "535.104.05", "nvidia_peermem": "535.104.05", "mlx5_core": None, "ib_core": None},
        infiniband=[f"mlx5_{i}" for i in range(18)],
        iommu="identity",
    )


def without_gpus_or_nics(m: Machine) -> Machine:
    """The same machine with no GPU and no NIC on its bus."""
    return replace(m, devices=[], bridges={})
