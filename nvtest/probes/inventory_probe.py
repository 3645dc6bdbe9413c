#!/usr/bin/env python3
"""nvtest inventory probe: what this node is, as one JSON document on stdout.

Standalone (standard library only; runs with the node's own python3). Gathers
CPU, memory, OS and kernel from /proc and /etc, and the raw text of the field's
tools for the controller to parse: ``lspci -vmm -nn`` (pciutils), ``nvidia-smi
-q -x`` (NVIDIA driver), ``ibstat`` (infiniband-diags), plus which tools and
Python libraries the node has. A missing tool is recorded with the reason,
never an error. Read-only: it changes nothing on the node.

Output: {"probe": "inventory", "probe_version": 1, "status": "ok", "host": ...,
"cpu": {...}, "memory": {...}, "os": {...}, "tools": {name: path|null},
"python": {...}, "raw": {tool: {"cmd": [...], "rc": int|null, "stdout": str, "stderr": str, "reason": str|null}}}
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import socket
import subprocess
import sys

PROBE_VERSION = 1
TOOLS = (
    "nvidia-smi", "lspci", "ibstat", "ibv_devinfo", "dcgmi", "nvbandwidth", "all_reduce_perf",
    "ib_write_bw", "mpirun", "torchrun", "cc", "gcc", "iperf3", "srun",
)
RAW_COMMANDS = {
    "lspci": ["lspci", "-vmm", "-nn", "-D"],
    "nvidia-smi-xml": ["nvidia-smi", "-q", "-x"],
    "ibstat": ["ibstat"],
}


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


def run_raw(cmd: list, timeout_s: float = 60.0) -> dict:
    exe = shutil.which(cmd[0])
    if exe is None:
        return {"cmd": cmd, "rc": None, "stdout": "", "stderr": "", "reason": f"{cmd[0]} not found on PATH"}
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, errors="replace")
    except subprocess.TimeoutExpired:
        return {"cmd": cmd, "rc": None, "stdout": "", "stderr": "", "reason": f"timed out after {timeout_s:g} s"}
    except OSError as exc:
        return {"cmd": cmd, "rc": None, "stdout": "", "stderr": "", "reason": f"cannot run: {exc}"}
    return {"cmd": cmd, "rc": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr, "reason": None}


def main() -> int:
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
        "raw": {name: run_raw(cmd) for name, cmd in RAW_COMMANDS.items()},
    }
    json.dump(doc, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
