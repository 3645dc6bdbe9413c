"""NVML (pynvml) helpers: the GPUs as the driver sees them, whatever CUDA_VISIBLE_DEVICES says."""

from __future__ import annotations

import contextlib
from typing import Any

import _devices as hw
import _libraries as libs


def nvml_gpus() -> list[dict[str, Any]]:
    """GPUs as NVML sees them: ``[{"nvml_index", "gpu_name", "pci_bus_id", "numa_node"}]``.

    Empty when pynvml is missing or NVML cannot initialise (no driver).  NVML
    indices ignore CUDA_VISIBLE_DEVICES; join with CUDA devices on ``pci_bus_id``.
    """
    nvml, _ = libs.optional_import("pynvml")
    if nvml is None:
        return []
    try:
        nvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no driver
        return []
    gpus = []
    try:
        for i in range(nvml.nvmlDeviceGetCount()):
            h = nvml.nvmlDeviceGetHandleByIndex(i)
            name = nvml.nvmlDeviceGetName(h)
            bus = nvml.nvmlDeviceGetPciInfo(h).busId
            name = name.decode() if isinstance(name, bytes) else name
            bus = (bus.decode() if isinstance(bus, bytes) else bus).lower()
            gpus.append({"nvml_index": i, "gpu_name": name, "pci_bus_id": bus,
                         "numa_node": hw.pci_numa_node(bus)})
    finally:
        with contextlib.suppress(Exception):
            nvml.nvmlShutdown()
    return gpus
