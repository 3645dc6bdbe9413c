"""Catalog of NVIDIA Xid codes: name, severity, usual cause, recommended action, source.

Summaries are our own wording of NVIDIA's "Xid Errors" page in the GPU deployment and
management documentation, and of the hardware-fault Xid lists of Azure's health checks and
Imbue's host validation quoted in ``sku-reference.md`` (``[Azure]``/``[Imbue]`` in ``source``).
Severity: ``fatal`` (GPU unusable until reset/power cycle, or hardware replacement likely),
``error`` (a job failed; the GPU usually recovers), ``warning`` (a recorded event to watch),
``info`` (a consequence of another error).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "HARDWARE_XIDS",
    "XID_CATALOG",
    "XidInfo",
    "describe_xid",
    "is_hardware_fault",
    "lookup_xid",
]

NVIDIA = "NVIDIA Xid Errors (GPU deployment and management documentation)"
AZURE = "Azure HPC health checks Xid list"
IMBUE = "Imbue host validation Xid ranges"


@dataclass(frozen=True)
class XidInfo:
    """One Xid code. ``hardware`` is True when the Azure or Imbue lists treat it as a hardware fault."""

    code: int
    name: str
    severity: str
    cause: str
    action: str
    source: str
    hardware: bool = False
    known: bool = True


def _x(code: int, name: str, severity: str, cause: str, action: str, *extra: str) -> XidInfo:
    sources = "; ".join((NVIDIA, *extra))
    return XidInfo(code, name, severity, cause, action, sources, code in HARDWARE_XIDS)


_AZURE = frozenset({48, 56, 57, 58, 62, 63, 64, 65, 68, 69, 73, 74, 79, 80, 81, 92, 119, 120})
_IMBUE = frozenset(
    {
        48,
        56,
        57,
        58,
        62,
        63,
        64,
        *range(68, 78),
        *range(79, 87),
        88,
        89,
        92,
        *range(94, 106),
        *range(110, 121),
        *range(122, 126),
    }
)
#: Codes that the Azure or Imbue lists count as a hardware fault when seen during a test.
HARDWARE_XIDS: frozenset[int] = _AZURE | _IMBUE

_RESET = "Drain the node, reset the GPU (or reboot) and rerun acceptance"
_RMA = "if it recurs after a reset and on a fresh job, open an RMA for the GPU/board"
_APP = "Usually a fault of the running program: check the job; rerun the GPU diagnostics if no program explains it"

XID_CATALOG: dict[int, XidInfo] = {
    i.code: i
    for i in (
        _x(
            13,
            "Graphics engine exception",
            "error",
            "A kernel hit an illegal instruction, address or parameter (often the program, sometimes hardware).",
            _APP,
        ),
        _x(
            31,
            "GPU memory page fault",
            "error",
            "A kernel accessed memory it had not mapped (MMU fault); nearly always a program bug.",
            _APP,
        ),
        _x(
            32,
            "Invalid or corrupted push buffer stream",
            "error",
            "The command stream to the GPU was corrupted: driver fault or PCIe/system-memory corruption.",
            "Check PCIe health (AER, replays) and system memory; update the driver; rerun",
        ),
        _x(
            43,
            "GPU stopped processing",
            "warning",
            "The driver reset a channel whose program faulted; the GPU itself keeps working.",
            _APP,
        ),
        _x(
            45,
            "Preemptive cleanup after earlier errors",
            "info",
            "Channels torn down because of an earlier error or a killed process.",
            "Look at the Xid logged before it",
        ),
        _x(
            48,
            "Double-bit (uncorrectable) ECC error",
            "fatal",
            "Device memory returned an uncorrectable error.",
            f"{_RESET}; {_RMA}",
            AZURE,
            IMBUE,
        ),
        _x(
            61,
            "Internal micro-controller breakpoint/warning",
            "error",
            "The GPU's internal management controller reported a problem.",
            f"{_RESET}; report if repeated",
        ),
        _x(
            62,
            "Internal micro-controller halt",
            "fatal",
            "The GPU's internal management controller stopped.",
            f"{_RESET}; {_RMA}",
            AZURE,
            IMBUE,
        ),
        _x(
            63,
            "ECC page retirement / row remapping recorded",
            "warning",
            "An ECC error led to a page retirement or row remap being recorded; it applies after a reset.",
            "Reset the GPU to apply it; fail acceptance while remaps are pending; cross-check nvidia-smi -q",
            AZURE,
            IMBUE,
        ),
        _x(
            64,
            "ECC page retirement / row remapping recording failure",
            "fatal",
            "The retirement or remap could not be recorded (spare rows exhausted or recording failed).",
            f"{_RESET}; {_RMA}",
            AZURE,
            IMBUE,
        ),
        _x(
            68,
            "Video decoder (NVDEC) exception",
            "error",
            "The video decode engine faulted.",
            f"{_RESET}; {_RMA}",
            AZURE,
            IMBUE,
        ),
        _x(
            69,
            "Graphics engine class error",
            "error",
            "The graphics/compute engine received an invalid operation.",
            f"{_RESET}; {_RMA}",
            AZURE,
            IMBUE,
        ),
        _x(
            73,
            "Video encoder (NVENC) error",
            "error",
            "The video encode engine faulted.",
            f"{_RESET}; {_RMA}",
            AZURE,
            IMBUE,
        ),
        _x(
            74,
            "NVLink error",
            "fatal",
            "An NVLink reported a fatal or repeated error (link, cable/board or NVSwitch).",
            "Check nvidia-smi nvlink -s / -e and the fabric manager; reset; reseat or RMA if it recurs",
            AZURE,
            IMBUE,
        ),
        _x(
            79,
            "GPU has fallen off the bus",
            "fatal",
            "The GPU stopped answering on PCIe (power, thermal, board or slot fault).",
            "Drain the node; power-cycle or reseat; check PCIe/AER and power; RMA if repeated",
            AZURE,
            IMBUE,
        ),
        _x(
            92,
            "High single-bit ECC error rate",
            "warning",
            "Correctable memory errors are arriving at a high rate.",
            "Watch ECC counters; run memory diagnostics; plan replacement if the rate persists",
            AZURE,
            IMBUE,
        ),
        _x(
            94,
            "Contained ECC error",
            "error",
            "An uncorrectable memory error was contained to the affected program, which was stopped.",
            "Reset the GPU before new work; RMA if it recurs",
            IMBUE,
        ),
        _x(
            95,
            "Uncontained ECC error",
            "fatal",
            "An uncorrectable memory error could not be contained; every program on the GPU is affected.",
            f"{_RESET}; {_RMA}",
            IMBUE,
        ),
        _x(
            109,
            "Context switch timeout",
            "error",
            "A context did not switch out in time: a hung or very long kernel, or a GPU fault.",
            "Check the program; if it recurs without one, reset and run diagnostics",
        ),
        _x(
            119,
            "GSP RPC timeout",
            "fatal",
            "The GPU System Processor firmware stopped answering the driver.",
            f"{_RESET}; update driver/firmware; {_RMA}",
            AZURE,
            IMBUE,
        ),
        _x(
            120,
            "GSP error",
            "fatal",
            "The GPU System Processor firmware reported an error.",
            f"{_RESET}; update driver/firmware; {_RMA}",
            AZURE,
            IMBUE,
        ),
        _x(
            121,
            "C2C link corrected error",
            "warning",
            "The chip-to-chip link (Grace-Hopper/Blackwell) corrected errors.",
            "Watch the rate; reset and report if it keeps rising",
        ),
        _x(
            122,
            "SPI PMU RPC read failure",
            "error",
            "Reading the board's SPI flash through the management unit failed.",
            f"{_RESET}; {_RMA}",
            IMBUE,
        ),
        _x(
            123,
            "SPI PMU RPC write failure",
            "error",
            "Writing the board's SPI flash through the management unit failed.",
            f"{_RESET}; {_RMA}",
            IMBUE,
        ),
        _x(
            124,
            "SPI PMU RPC erase failure",
            "error",
            "Erasing the board's SPI flash through the management unit failed.",
            f"{_RESET}; {_RMA}",
            IMBUE,
        ),
        _x(
            140,
            "Unrecovered ECC error",
            "fatal",
            "An ECC error left memory in a state the driver could not recover.",
            f"{_RESET}; {_RMA}",
        ),
        _x(
            143,
            "GPU initialization failure",
            "fatal",
            "The GPU failed to initialise (firmware or hardware).",
            f"Power-cycle the node; {_RMA}",
        ),
        _x(
            144,
            "NVLink SAW error",
            "error",
            "An NVLink (NVLink 5) unit reported an error.",
            f"{_RESET}; {_RMA}",
        ),
        _x(
            145,
            "NVLink RLW error",
            "error",
            "An NVLink (NVLink 5) unit reported an error.",
            f"{_RESET}; {_RMA}",
        ),
        _x(
            146,
            "NVLink TLW error",
            "error",
            "An NVLink (NVLink 5) unit reported an error.",
            f"{_RESET}; {_RMA}",
        ),
        _x(
            147,
            "NVLink TREX error",
            "error",
            "An NVLink (NVLink 5) unit reported an error.",
            f"{_RESET}; {_RMA}",
        ),
        _x(
            148,
            "NVLink NVLPW_CTRL error",
            "error",
            "An NVLink (NVLink 5) unit reported an error.",
            f"{_RESET}; {_RMA}",
        ),
        _x(
            149,
            "NVLink NETIR error",
            "error",
            "An NVLink (NVLink 5) unit reported an error.",
            f"{_RESET}; {_RMA}",
        ),
        _x(
            150,
            "NVLink MSE error",
            "error",
            "An NVLink (NVLink 5) unit reported an error.",
            f"{_RESET}; {_RMA}",
        ),
    )
}


def lookup_xid(code: int) -> XidInfo | None:
    """The catalog entry for ``code``, or None when the catalog does not know it."""
    return XID_CATALOG.get(code)


def describe_xid(code: int) -> XidInfo:
    """The catalog entry, or an ``known=False`` placeholder (severity ``error``) for an unknown code."""
    info = XID_CATALOG.get(code)
    if info is not None:
        return info
    return XidInfo(
        code,
        f"Xid {code}",
        "error",
        "Not in nvtest's catalog.",
        "Look the code up in NVIDIA's Xid documentation for this driver",
        NVIDIA,
        code in HARDWARE_XIDS,
        False,
    )


def is_hardware_fault(code: int) -> bool:
    """True when the Azure or Imbue lists count ``code`` as a hardware fault."""
    return code in HARDWARE_XIDS
