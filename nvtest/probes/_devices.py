"""Which GPUs and CPUs a probe may use: GPU library, device indices, identity, PCI locality.

CUDA device indices are the visible ones (after ``CUDA_VISIBLE_DEVICES``); a
GPU's identity (name, PCI bus id, NUMA node) joins it with NVML and sysfs.  PCI
locality comes from sysfs (``/sys/bus/pci/devices/<bus id>/numa_node`` and
``local_cpulist``); every reader returns None where the kernel does not say.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import _contract as contract
import _libraries as libs


def select_gpu_backend(prefer: Sequence[str] = ("torch", "cupy")) -> tuple[str, ModuleType, int]:
    """First usable GPU library of ``prefer``: ``(name, module, visible device count)``.

    Raises:
        ProbeSkip: no library of ``prefer`` imports and sees a CUDA device; the
            reason lists why each was unusable, e.g. ``"no CUDA device:
            torch.cuda.is_available() is False; cupy not importable: ..."``.
    """
    reasons = []
    for name in prefer:
        mod, why = libs.optional_import(name)
        if mod is None:
            reasons.append(why)
            continue
        try:
            if name == "torch":
                if not mod.cuda.is_available():
                    reasons.append("no CUDA device: torch.cuda.is_available() is False")
                    continue
                return name, mod, int(mod.cuda.device_count())
            count = int(mod.cuda.runtime.getDeviceCount())
            if count:
                return name, mod, count
            reasons.append("no CUDA device: cupy getDeviceCount() is 0")
        except Exception as exc:  # noqa: BLE001 - e.g. cudaErrorNoDevice, driver mismatch
            reasons.append(f"no CUDA device: {name}: {type(exc).__name__}: {exc}")
    raise contract.ProbeSkip("; ".join(str(r) for r in reasons))


def resolve_device(requested: str) -> str:
    """``auto`` -> ``"cuda"`` when a GPU library sees a device, else ``"cpu"``."""
    if requested != "auto":
        return requested
    try:
        select_gpu_backend()
    except contract.ProbeSkip:
        return "cpu"
    return "cuda"


def gpu_indices(count: int, wanted: Sequence[int] | None) -> list[int]:
    """Visible device indices to use: ``wanted`` (``--gpus``), or all ``range(count)`` when None.

    Raises:
        ProbeError: an index of ``wanted`` is outside ``range(count)``.
    """
    if wanted is None:
        return list(range(count))
    bad = [i for i in wanted if not 0 <= i < count]
    if bad:
        raise contract.ProbeError(f"--gpus {bad} outside the {count} visible CUDA devices")
    return list(wanted)


def gpu_identity(backend: str, module: ModuleType, index: int) -> dict[str, Any]:
    """``{"gpu_name", "pci_bus_id", "numa_node"}`` of visible GPU ``index`` (None where unknown).

    ``backend`` is ``"torch"`` or ``"cupy"`` and ``module`` that library; the
    bus id has an 8-digit domain (``"00000000:1b:00.0"``, nvidia-smi style).
    Never raises: a library error leaves the fields None.
    """
    name = bus = None
    with contextlib.suppress(Exception):
        if backend == "torch":
            props = module.cuda.get_device_properties(index)
            name = props.name
            if hasattr(props, "pci_bus_id"):
                bus = f"{props.pci_domain_id:08x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
        else:
            props = module.cuda.runtime.getDeviceProperties(index)
            name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
            bus = f"{props['pciDomainID']:08x}:{props['pciBusID']:02x}:{props['pciDeviceID']:02x}.0"
    return {"gpu_name": name, "pci_bus_id": bus, "numa_node": pci_numa_node(bus)}


def _pci_sysfs_dir(bus_id: str, root: str) -> str:
    """sysfs path of a PCI function; accepts 8- or 4-digit domains (nvidia-smi prints 8)."""
    bus_id = bus_id.lower()
    if len(bus_id.split(":")[0]) == 8:
        bus_id = bus_id[4:]
    return os.path.join(root, bus_id)


def pci_numa_node(bus_id: str | None, root: str = "/sys/bus/pci/devices") -> int | None:
    """NUMA node of a PCI device from sysfs ``numa_node`` (None if unknown or -1)."""
    if not bus_id:
        return None
    try:
        with open(os.path.join(_pci_sysfs_dir(bus_id, root), "numa_node")) as fh:
            node = int(fh.read().strip())
    except (OSError, ValueError):
        return None
    return node if node >= 0 else None


def parse_cpu_list(text: str) -> list[int]:
    """Kernel cpu list syntax ``"0-3,8,10-11"`` -> ``[0, 1, 2, 3, 8, 10, 11]``; ValueError if malformed."""
    cpus: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        cpus.extend(range(int(lo), int(hi or lo) + 1))
    return cpus


def pci_local_cpus(bus_id: str | None, root: str = "/sys/bus/pci/devices") -> list[int] | None:
    """CPUs local to a PCI device (sysfs ``local_cpulist``), None if unreadable."""
    if not bus_id:
        return None
    try:
        with open(os.path.join(_pci_sysfs_dir(bus_id, root), "local_cpulist")) as fh:
            return parse_cpu_list(fh.read()) or None
    except (OSError, ValueError):
        return None


def available_cpus() -> int:
    """CPUs this process may run on (affinity mask, so taskset/cgroups are honoured)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1
