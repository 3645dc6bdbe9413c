#!/usr/bin/env python3
"""nvtest inventory probe: what this node is, as one JSON document on stdout.

Standalone (standard library only; runs with the node's own python3). Gathers
CPU, memory, OS and kernel from /proc and /etc; the PCI bus as the kernel shows it
in sysfs (``/sys/bus/pci/devices/*/{vendor,device,class,numa_node}``: the source
that cannot lie by failing, read before any tool); which PCI function each RDMA
device and network interface is (``/sys/class/infiniband``, ``/sys/class/net``);
the environment that shapes collective and MPI runs (``NCCL_*``, ``UCX_*``,
``OMPI_MCA_*``, bootstrap interface variables) and the CPU and NUMA binding of the
probe's process; and the raw text of the field's tools for the controller to
parse: ``lspci -vmm -nn -D`` (pciutils), ``nvidia-smi -q -x`` (NVIDIA driver),
``ibstat`` (infiniband-diags), plus which tools and Python libraries the node
has. For the as-built record (docs/asbuilt.md): the system's DMI identity
(``/sys/class/dmi/id``: vendor, product, serials, BIOS; no dmidecode, no root needed but for
the serials, which say "permission denied" when unreadable), each RDMA device's firmware,
board id (PSID), type and GUIDs from ``/sys/class/infiniband``, and the raw text of
``ofed_info -s`` and ``nv-fabricmanager --version`` (each with a 10 s deadline). A missing
tool or an unreadable sysfs is recorded with the reason, never an error. Read-only: it
changes nothing on the node. ``$NVTEST_ASBUILT_ROOT`` (default ``/``) is the test seam of
the as-built files: nvtest's tests point it at a tree of recorded values.

``--nvml-cause CAUSE --nvml-deadline S``: the controller read in the kernel log that a GPU
needs a reset (CAUSE, one sentence): ``nvidia-smi`` gets S seconds instead of 60 (a GPU fallen
off the bus may leave it answering for the others, or hanging); when it gives no answer in
time, its entry in ``raw`` carries ``stopped: CAUSE (nvidia-smi gave no answer within S s)``.

Output: {"probe": "inventory", "probe_version": 3, "status": "ok", "host": ...,
"cpu": {..., "affinity": "0-63", "numa_nodes": "0-1"}, "memory": {...}, "os": {...},
"tools": {name: path|null}, "python": {...},
"pci_sysfs": {"path": str, "devices": [{"slot", "vendor", "device", "class", "numa_node", "driver"}],
"reason": str|null}, "rdma_sysfs": {hca: {"pci": slot, "numa_node": int|null}},
"net_sysfs": {iface: {"pci": slot|null, "operstate": str|null}}, "environment": {name: value},
"asbuilt": {"dmi": {"path": str, "fields": {name: {"value": str|null, "reason": str|null}}},
"infiniband": {"path": str, "reason": str|null, "devices": {hca: {field: {"value", "reason"}}}}},
"raw": {tool: {"cmd": [...], "rc": int|null, "stdout": str, "stderr": str, "reason": str|null}}}
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys

PROBE_VERSION = 3
PCI_SYSFS = "/sys/bus/pci/devices"
#: Environment variables that change what a collective, MPI or torch.distributed run does.
ENV_PREFIXES = ("NCCL_", "UCX_", "OMPI_MCA_", "PMIX_MCA_", "NVSHMEM_")
ENV_NAMES = (
    "GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME", "MASTER_ADDR", "MASTER_PORT", "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER", "OMP_NUM_THREADS", "OMP_PROC_BIND", "OMP_PLACES", "LD_LIBRARY_PATH",
)
TOOLS = (
    "nvidia-smi", "lspci", "ibstat", "ibv_devinfo", "dcgmi", "nvbandwidth", "all_reduce_perf",
    "ib_write_bw", "mpirun", "torchrun", "cc", "gcc", "iperf3", "srun",
)
RAW_COMMANDS = {
    "lspci": ["lspci", "-vmm", "-nn", "-D"],
    "nvidia-smi-xml": ["nvidia-smi", "-q", "-x"],
    "ibstat": ["ibstat"],
}
#: Cheap version reports for the as-built record, each with its own short deadline.
ASBUILT_COMMANDS = {
    "ofed_info": ["ofed_info", "-s"],
    "nv-fabricmanager": ["nv-fabricmanager", "--version"],
}
ASBUILT_TIMEOUT_S = 10.0
#: /sys/class/dmi/id files (SMBIOS as the kernel exports it); serials are root-only (0400).
DMI_FIELDS = (
    "sys_vendor", "product_name", "product_serial", "product_version", "board_vendor", "board_name",
    "board_serial", "chassis_serial", "bios_vendor", "bios_version", "bios_date",
)
#: /sys/class/infiniband/<hca>/ files: firmware, PSID, HCA type and GUIDs.
IB_FIELDS = ("fw_ver", "board_id", "hca_type", "node_guid", "sys_image_guid")


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


def cpu_info() -> dict:
    text = _read("/proc/cpuinfo") or ""
    model = None
    physical = set()
    cores = set()
    threads = 0
    phys_id = "0"
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key == "processor":
            threads += 1
        elif key == "model name" and model is None:
            model = value
        elif key == "physical id":
            phys_id = value
            physical.add(value)
        elif key == "core id":
            cores.add((phys_id, value))
    return {
        "model": model or platform.processor() or platform.machine(),
        "sockets": len(physical) or 1,
        "cores": len(cores) or threads or os.cpu_count(),
        "threads": threads or os.cpu_count(),
        "online_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "affinity": cpu_ranges(list(os.sched_getaffinity(0))) if hasattr(os, "sched_getaffinity") else None,
        "numa_nodes": (_read("/sys/devices/system/node/online") or "").strip() or None,
        "arch": platform.machine(),
    }


def memory_info() -> dict:
    out = {}
    for line in (_read("/proc/meminfo") or "").splitlines():
        key, _, value = line.partition(":")
        if key in ("MemTotal", "MemAvailable", "SwapTotal", "HugePages_Total"):
            parts = value.split()
            if parts:
                out[key] = int(parts[0])
    return {
        "total_kib": out.get("MemTotal"),
        "available_kib": out.get("MemAvailable"),
        "swap_total_kib": out.get("SwapTotal"),
    }


def os_info() -> dict:
    pretty = None
    for line in (_read("/etc/os-release") or "").splitlines():
        if line.startswith("PRETTY_NAME="):
            pretty = line.split("=", 1)[1].strip().strip('"')
    return {"pretty_name": pretty, "kernel": platform.release(), "system": platform.system()}


def python_info() -> dict:
    libs = {}
    for name in ("numpy", "torch", "cupy", "pynvml", "mpi4py"):
        try:
            from importlib.metadata import version

            libs[name] = version(name if name != "pynvml" else "nvidia-ml-py")
        except Exception:
            libs[name] = None
    return {"version": platform.python_version(), "executable": sys.executable, "libraries": libs}


def _hexid(path: str) -> str | None:
    text = (_read(path) or "").strip().lower()
    return text[2:] if text.startswith("0x") else (text or None)


def pci_sysfs(root: str = PCI_SYSFS) -> dict:
    """Every PCI function the kernel enumerated: ids lower-case hex without 0x, class 6 digits."""
    try:
        slots = sorted(os.listdir(root))
    except OSError as exc:
        return {"path": root, "devices": [], "reason": f"cannot read {root}: {exc.strerror or exc}"}
    devices = []
    for slot in slots:
        d = os.path.join(root, slot)
        numa = (_read(os.path.join(d, "numa_node")) or "").strip()
        driver = os.path.join(d, "driver")
        devices.append({
            "slot": slot,
            "vendor": _hexid(os.path.join(d, "vendor")),
            "device": _hexid(os.path.join(d, "device")),
            "class": _hexid(os.path.join(d, "class")),
            "numa_node": int(numa) if numa.lstrip("-").isdigit() else None,
            "driver": os.path.basename(os.path.realpath(driver)) if os.path.islink(driver) else None,
        })
    return {"path": root, "devices": devices, "reason": None}


def class_devices(root: str) -> dict:
    """``/sys/class/<root>/<name>/device`` -> the PCI slot and NUMA node of each device."""
    out = {}
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return out
    for name in names:
        dev = os.path.join(root, name, "device")
        slot = os.path.basename(os.path.realpath(dev)) if os.path.exists(dev) else None
        numa = (_read(os.path.join(dev, "numa_node")) or "").strip() if slot else ""
        state = (_read(os.path.join(root, name, "operstate")) or "").strip() or None
        out[name] = {"pci": slot, "numa_node": int(numa) if numa.lstrip("-").isdigit() else None,
                     "operstate": state}
    return out


def _field(path: str) -> dict:
    """``{"value": text, "reason": None}`` or ``{"value": None, "reason": why}`` for one file."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            value = fh.read().strip()
    except OSError as exc:
        why = "permission denied (readable by root only)" if exc.errno == 13 else (exc.strerror or str(exc))
        return {"value": None, "reason": f"{path}: {why}"}
    if not value:
        return {"value": None, "reason": f"{path}: empty"}
    return {"value": value, "reason": None}


def asbuilt_sysfs(root: str) -> dict:
    """DMI identity and each RDMA device's firmware, PSID and GUIDs, each field with why it is
    missing; ``root`` prefixes ``sys/class/...`` (``/`` on a node)."""
    dmi = os.path.join(root, "sys/class/dmi/id")
    ib = os.path.join(root, "sys/class/infiniband")
    try:
        hcas = sorted(os.listdir(ib))
        ib_reason = None
    except OSError as exc:
        hcas, ib_reason = [], f"cannot read {ib}: {exc.strerror or exc}"
    return {
        "dmi": {"path": dmi, "fields": {name: _field(os.path.join(dmi, name)) for name in DMI_FIELDS}},
        "infiniband": {
            "path": ib,
            "reason": ib_reason,
            "devices": {h: {f: _field(os.path.join(ib, h, f)) for f in IB_FIELDS} for h in hcas},
        },
    }


def environment() -> dict:
    """The variables of :data:`ENV_PREFIXES` and :data:`ENV_NAMES` set in this process."""
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith(ENV_PREFIXES) or k in ENV_NAMES}


def cpu_ranges(cpus: list) -> str:
    """``[0, 1, 2, 5]`` -> ``"0-2,5"``."""
    parts, start, prev = [], None, None
    for c in sorted(cpus) + [None]:
        if start is not None and (c is None or c != prev + 1):
            parts.append(f"{start}-{prev}" if prev != start else str(start))
            start = None
        if c is not None and start is None:
            start = c
        prev = c
    return ",".join(parts)


def run_raw(cmd: list, timeout_s: float = 60.0) -> dict:
    """Run ``cmd`` in its own process group; past ``timeout_s`` the whole group is killed, so a
    child that keeps the tool's output open cannot hold the probe past the deadline."""
    exe = shutil.which(cmd[0])
    if exe is None:
        return {"cmd": cmd, "rc": None, "stdout": "", "stderr": "", "reason": f"{cmd[0]} not found on PATH"}
    try:
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
            errors="replace", start_new_session=True,
        )
    except OSError as exc:
        return {"cmd": cmd, "rc": None, "stdout": "", "stderr": "", "reason": f"cannot run: {exc}"}
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
        proc.wait()
        return {"cmd": cmd, "rc": None, "stdout": "", "stderr": "", "reason": f"timed out after {timeout_s:g} s"}
    return {"cmd": cmd, "rc": proc.returncode, "stdout": out, "stderr": err, "reason": None}


def main(argv: list | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)

    def option(name: str) -> str | None:
        return argv[argv.index(name) + 1] if name in argv[:-1] else None

    cause, deadline = option("--nvml-cause"), float(option("--nvml-deadline") or 60)
    raw = {}
    for name, cmd in RAW_COMMANDS.items():
        if cause is not None and cmd[0] == "nvidia-smi":
            raw[name] = run_raw(cmd, deadline)
            if raw[name]["rc"] is None and str(raw[name]["reason"]).startswith("timed out"):
                # nvtest.session.kernel_log.STOPPED: the kernel log's line, then what happened
                raw[name]["reason"] = f"stopped: {cause} (nvidia-smi gave no answer within {deadline:g} s)"
        else:
            raw[name] = run_raw(cmd)
    doc = {
        "probe": "inventory",
        "probe_version": PROBE_VERSION,
        "status": "ok",
        "reason": None,
        "host": socket.gethostname(),
        "cpu": cpu_info(),
        "memory": memory_info(),
        "os": os_info(),
        "python": python_info(),
        "tools": {t: shutil.which(t) for t in TOOLS},
        "pci_sysfs": pci_sysfs(),
        "rdma_sysfs": class_devices("/sys/class/infiniband"),
        "net_sysfs": class_devices("/sys/class/net"),
        "environment": environment(),
        "asbuilt": asbuilt_sysfs(os.environ.get("NVTEST_ASBUILT_ROOT") or "/"),
        "raw": raw,
    }
    doc["raw"].update({name: run_raw(cmd, ASBUILT_TIMEOUT_S) for name, cmd in ASBUILT_COMMANDS.items()})
    json.dump(doc, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
