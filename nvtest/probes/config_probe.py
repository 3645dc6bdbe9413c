#!/usr/bin/env python3
"""nvtest configuration-audit probe: what the Playbook's audit needs from one node, as one JSON document.

Usage::

    python3 config_probe.py [--sysfs-root DIR] [--image-marker PATH]

Standalone (standard library only). Read-only: it reads files and runs the field's tools
in their reporting modes; it changes nothing. What it reads, all under ``--sysfs-root``
(default ``/``):

- ``sys/bus/pci/devices/*``: every NVIDIA GPU (vendor ``0x10de``, class ``0x03xxxx``) and
  RDMA NIC (vendor ``0x15b3`` class ``0x02xxxx``, or any class ``0x0207xx``; virtual
  functions left out): ``numa_node``, ``local_cpulist``, the IOMMU group and its ``type``,
  the driver, and the PCIe bridges between the device and its root complex (the
  directories of its resolved sysfs path);
- ``sys/devices/system/node/node*/cpulist``, ``proc/self/status`` (``Cpus_allowed_list``:
  the CPUs this process, started the way nvtest starts every probe, may run on),
  ``proc/cmdline``, ``sys/kernel/iommu_groups``, ``sys/class/iommu``,
  ``sys/module/{nvidia,nvidia_peermem,nv_peer_mem,...}``, ``sys/class/infiniband``,
  ``proc/sys/kernel/osrelease``, ``proc/stat`` (``btime``);
- the image marker (``--image-marker``, default ``etc/nvtest-image-id`` under the root):
  its first line and modification time.

And the raw text of ``lspci -D -vvv`` (ACSCtl lines), ``ip -d -j addr show``,
``nvidia-smi --query-gpu=pci.bus_id,persistence_mode --format=csv,noheader`` and the
kernel and driver packages (``dpkg-query -W`` or ``rpm -qa``), for the controller to read.
A tool that is missing or fails is recorded with its words, never hidden.

``--sysfs-root`` (or ``$NVTEST_SYSFS_ROOT``) is the test seam: nvtest's tests point it
at a directory built from recorded values of real machines; on a node it stays ``/``.

Output: ``{"probe": "config", "status": "ok", "root": ..., "pci": [...], "bridges": {...},
"numa_nodes": {...}, "cpus_allowed": ..., "cmdline": ..., "iommu": {...}, "modules": {...},
"infiniband": [...], "kernel": ..., "boot_time": ..., "image_marker": {...},
"raw": {tool: {"cmd", "rc", "stdout", "stderr", "reason"}}}``.
"""

from __future__ import annotations

import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import shutil  # noqa: E402
import subprocess  # noqa: E402
from typing import Any  # noqa: E402

import _contract as contract  # noqa: E402

PROBE = "config"
BDF = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
MODULES = ("nvidia", "nvidia_peermem", "nv_peer_mem", "nvidia_uvm", "ib_core", "mlx5_core", "mlx5_ib")
#: Package name patterns of the kernel and the NVIDIA driver stack (dpkg-query / rpm globs).
PACKAGES = (
    "linux-image-*", "linux-modules-*", "kernel", "kernel-core", "kernel-modules",
    "nvidia-driver*", "nvidia-kernel-*", "nvidia-dkms-*", "libnvidia-compute-*",
    "nvidia-utils-*", "cuda-drivers*", "kmod-nvidia*", "nvidia-fabricmanager*",
    "mlnx-ofed-kernel*",
)
DPKG_FORMAT = "${Package}\t${Version}\t${db-fsys:Last-Modified}\t${db:Status-Abbrev}\n"
RPM_FORMAT = "%{NAME}\t%{VERSION}-%{RELEASE}\t%{INSTALLTIME}\tii\n"


def read(path: str) -> str | None:
    """The text of ``path``, or None when it cannot be read."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


def read_line(path: str) -> str | None:
    text = read(path)
    return None if text is None else text.strip()


def run_tool(cmd: list[str], timeout_s: float = 60.0) -> dict[str, Any]:
    """Run a reporting command; ``{cmd, rc, stdout, stderr, reason}`` (reason: why it did not run)."""
    if shutil.which(cmd[0]) is None:
        return {"cmd": cmd, "rc": None, "stdout": "", "stderr": "", "reason": f"{cmd[0]} not found on PATH"}
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, errors="replace")
    except subprocess.TimeoutExpired:
        return {"cmd": cmd, "rc": None, "stdout": "", "stderr": "", "reason": f"timed out after {timeout_s:g} s"}
    except OSError as exc:
        return {"cmd": cmd, "rc": None, "stdout": "", "stderr": "", "reason": f"cannot run: {exc}"}
    return {"cmd": cmd, "rc": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr, "reason": None}


def device_kind(vendor: str, cls: str, dev_dir: str) -> str | None:
    """``gpu``, ``nic`` or None (not audited) for one PCI function."""
    if os.path.exists(os.path.join(dev_dir, "physfn")):
        return None  # an SR-IOV virtual function: audited through its physical function
    if vendor == "0x10de" and cls.startswith("0x03"):
        return "gpu"
    if cls.startswith("0x0207") or (vendor == "0x15b3" and cls.startswith("0x02")):
        return "nic"
    return None


def bridges_of(real: str) -> list[str]:
    """The BDFs between the device and its root complex, top first (root port first)."""
    parts = real.split(os.sep)
    found = [p for p in parts if BDF.match(p)]
    return found[:-1]


def pci_devices(root: str) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """Audited PCI functions and the bridges on their paths, from ``<root>/sys/bus/pci/devices``."""
    base = os.path.join(root, "sys/bus/pci/devices")
    devices: list[dict[str, Any]] = []
    bridges: dict[str, dict[str, Any]] = {}
    try:
        names = sorted(os.listdir(base))
    except OSError:
        return devices, bridges
    for name in names:
        d = os.path.join(base, name)
        vendor = read_line(os.path.join(d, "vendor")) or ""
        cls = read_line(os.path.join(d, "class")) or ""
        kind = device_kind(vendor, cls, d)
        if kind is None:
            continue
        real = os.path.realpath(d)
        path = bridges_of(real)
        numa = read_line(os.path.join(d, "numa_node"))
        group_link = os.path.join(d, "iommu_group")
        group = os.path.basename(os.path.realpath(group_link)) if os.path.exists(group_link) else None
        driver_link = os.path.join(d, "driver")
        devices.append({
            "bdf": name, "kind": kind, "vendor": vendor, "device": read_line(os.path.join(d, "device")),
            "class": cls, "numa_node": int(numa) if numa and numa.lstrip("-").isdigit() else None,
            "local_cpulist": read_line(os.path.join(d, "local_cpulist")),
            "iommu_group": group,
            "iommu_group_type": read_line(os.path.join(group_link, "type")) if group else None,
            "driver": os.path.basename(os.path.realpath(driver_link)) if os.path.exists(driver_link) else None,
            "path": path,
        })  # fmt: skip
        top = os.path.dirname(real)
        for bdf in reversed(path):
            bdir = top
            top = os.path.dirname(top)
            bridges.setdefault(bdf, {
                "vendor": read_line(os.path.join(bdir, "vendor")),
                "device": read_line(os.path.join(bdir, "device")),
                "class": read_line(os.path.join(bdir, "class")),
            })  # fmt: skip
    return devices, bridges


def numa_nodes(root: str) -> dict[str, str | None]:
    """NUMA node id -> its cpulist (``sys/devices/system/node/node*/cpulist``)."""
    base = os.path.join(root, "sys/devices/system/node")
    out: dict[str, str | None] = {}
    try:
        entries = os.listdir(base)
    except OSError:
        return out
    for e in sorted(entries):
        if e.startswith("node") and e[4:].isdigit():
            out[e[4:]] = read_line(os.path.join(base, e, "cpulist"))
    return out


def cpus_allowed(root: str) -> str | None:
    """``Cpus_allowed_list`` of ``<root>/proc/self/status`` (this process, as started)."""
    for line in (read(os.path.join(root, "proc/self/status")) or "").splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return line.split(":", 1)[1].strip()
    return None


def modules(root: str) -> dict[str, dict[str, Any]]:
    """Loaded kernel modules of interest: ``{name: {"loaded": bool, "version": str|None}}``."""
    out = {}
    for m in MODULES:
        d = os.path.join(root, "sys/module", m)
        out[m] = {"loaded": os.path.isdir(d), "version": read_line(os.path.join(d, "version"))}
    return out


def listdir(path: str) -> list[str] | None:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return None


def boot_time(root: str) -> int | None:
    """Boot time, seconds since the epoch (``btime`` of ``proc/stat``)."""
    for line in (read(os.path.join(root, "proc/stat")) or "").splitlines():
        if line.startswith("btime "):
            return int(line.split()[1])
    return None


def image_marker(path: str) -> dict[str, Any]:
    """The image identity marker: its first line and modification time, or why there is none."""
    try:
        st = os.stat(path)
        with open(path, encoding="utf-8", errors="replace") as fh:
            first = fh.readline().strip()
    except OSError as exc:
        return {"path": path, "id": None, "mtime": None, "reason": exc.strerror or str(exc)}
    return {"path": path, "id": first or None, "mtime": int(st.st_mtime), "reason": None if first else "empty"}


def packages() -> dict[str, Any]:
    """The kernel and driver packages: ``dpkg-query -W`` where dpkg is, else ``rpm -qa``."""
    if shutil.which("dpkg-query"):
        res = run_tool(["dpkg-query", "-W", "-f", DPKG_FORMAT, *PACKAGES])
        res["manager"] = "dpkg"
        return res
    res = run_tool(["rpm", "-qa", "--qf", RPM_FORMAT, *PACKAGES])
    res["manager"] = "rpm"
    if res["reason"]:
        res["reason"] = "no package database tool: dpkg-query and rpm not found on PATH"
    return res


def body(args: Any, doc: dict[str, Any]) -> None:
    root = os.path.abspath(args.sysfs_root)
    devices, bridges = pci_devices(root)
    doc["root"] = root
    doc["pci"] = devices
    doc["bridges"] = bridges
    doc["numa_nodes"] = numa_nodes(root)
    doc["cpus_allowed"] = cpus_allowed(root)
    doc["cmdline"] = read_line(os.path.join(root, "proc/cmdline"))
    groups = listdir(os.path.join(root, "sys/kernel/iommu_groups"))
    doc["iommu"] = {"groups": None if groups is None else len(groups),
                    "classes": listdir(os.path.join(root, "sys/class/iommu")) or []}  # fmt: skip
    doc["modules"] = modules(root)
    doc["infiniband"] = listdir(os.path.join(root, "sys/class/infiniband"))
    doc["kernel"] = read_line(os.path.join(root, "proc/sys/kernel/osrelease"))
    doc["boot_time"] = boot_time(root)
    marker = args.image_marker or os.path.join(root, "etc/nvtest-image-id")
    doc["image_marker"] = image_marker(marker)
    raw: dict[str, Any] = {"ip": run_tool(["ip", "-d", "-j", "addr", "show"]), "packages": packages()}
    if devices:
        raw["lspci"] = run_tool(["lspci", "-D", "-vvv"])
    if any(d["kind"] == "gpu" for d in devices):
        raw["nvidia-smi"] = run_tool(
            ["nvidia-smi", "--query-gpu=pci.bus_id,persistence_mode", "--format=csv,noheader"]
        )
    doc["raw"] = raw
    doc["status"] = "ok"


def main(argv: list[str] | None = None) -> int:
    parser = contract.ProbeArgumentParser(prog="config_probe.py", description=__doc__.split("\n")[0])
    parser.add_argument("--sysfs-root", default=os.environ.get("NVTEST_SYSFS_ROOT") or "/",
                        help="root of sys/, proc/ and etc/ (test seam; default $NVTEST_SYSFS_ROOT or /)")
    parser.add_argument("--image-marker", default=None, help="image identity file (default ROOT/etc/nvtest-image-id)")
    return contract.run(PROBE, parser, body, argv)


if __name__ == "__main__":
    sys.exit(main())
