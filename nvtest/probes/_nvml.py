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


def nvml_board_identity(bus_id: str | None) -> dict[str, Any]:
    """``{"serial", "uuid", "driver"}`` of the GPU at PCI ``bus_id`` as NVML reports them.

    ``serial`` is the board serial number (``nvmlDeviceGetSerial``, what
    ``nvidia-smi -q`` prints as Serial Number), ``uuid`` the GPU UUID and
    ``driver`` the driver version; each None where pynvml, the driver or the
    field is unavailable.  Never raises.
    """
    out: dict[str, Any] = {"serial": None, "uuid": None, "driver": None}
    nvml, _ = libs.optional_import("pynvml")
    if nvml is None or not bus_id:
        return out
    try:
        nvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no driver
        return out

    def text(value: Any) -> str:
        return value.decode() if isinstance(value, bytes) else str(value)

    try:
        with contextlib.suppress(Exception):
            out["driver"] = text(nvml.nvmlSystemGetDriverVersion())
        with contextlib.suppress(Exception):
            h = nvml.nvmlDeviceGetHandleByPciBusId(bus_id)
            with contextlib.suppress(Exception):
                out["serial"] = text(nvml.nvmlDeviceGetSerial(h))
            with contextlib.suppress(Exception):
                out["uuid"] = text(nvml.nvmlDeviceGetUUID(h))
    finally:
        with contextlib.suppress(Exception):
            nvml.nvmlShutdown()
    return out
