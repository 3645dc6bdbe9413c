"""Catalog of NVIDIA Xid codes: name, severity, usual cause, recommended action, source.

Every code of NVIDIA's Xid catalog (:data:`NVIDIA_CATALOG`, 1-162 in r590) is known: those
described by hand below keep their wording, the others get NVIDIA's mnemonic and the class and
next step of NVIDIA's immediate-action bucket (:data:`BUCKETS`). Xid 154 ("GPU recovery action
changed", :data:`RECOVERY_ACTION_XID`) is judged by the action its line names
(:func:`recovery_step`): anything but ``None`` is the driver asking for a reset, a reboot or a
drain. A code outside the catalog is ``known=False`` (:func:`describe_xid`): not judged as a
warning, but as not measured (``unknown`` in the gate, ``error`` in a run).

Summaries are our own wording of NVIDIA's "Xid Errors" page in the GPU deployment and
management documentation, and of the hardware-fault Xid lists of Azure's health checks and
Imbue's host validation quoted in ``sku-reference.md`` (``[Azure]``/``[Imbue]`` in ``source``).
Severity: ``fatal`` (GPU unusable until reset/power cycle, or hardware replacement likely),
``error`` (a job failed; the GPU usually recovers), ``warning`` (a recorded event to watch),
``info`` (a consequence of another error).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

__all__ = [
    "BUCKETS",
    "HARDWARE_XIDS",
    "NVIDIA_CATALOG",
    "RECOVERY_ACTION_XID",
    "XID_CATALOG",
    "XidInfo",
    "describe_xid",
    "RESET_BUCKETS",
    "is_hardware_fault",
    "lookup_xid",
    "needs_reset",
    "recovery_request",
    "recovery_step",
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
    resolution: str = ""


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
#: NVIDIA's NVLink5 workflow (Xid 144-150): the GPU usually recovers (the run warns); the
#: line's own Fatal / Nonfatal word and a recurrence decide whether it is taken out of service.
_NVLINK5 = (
    "Check nvidia-smi nvlink -e and the line's own words (Fatal / Nonfatal) and watch for it "
    f"recurring; if the line says Fatal or it recurs, drain the node and reset the GPU; {_RMA}"
)
_APP = "Usually a fault of the running program: check the job; rerun the GPU diagnostics if no program explains it"

_HAND: dict[int, XidInfo] = {
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
            "Collect nvidia-bug-report.sh and watch for it recurring; if it recurs, drain the node, "
            "reset the GPU (or reboot) and report it",
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
            _NVLINK5,
        ),
        _x(
            145,
            "NVLink RLW error",
            "error",
            "An NVLink (NVLink 5) unit reported an error.",
            _NVLINK5,
        ),
        _x(
            146,
            "NVLink TLW error",
            "error",
            "An NVLink (NVLink 5) unit reported an error.",
            _NVLINK5,
        ),
        _x(
            147,
            "NVLink TREX error",
            "error",
            "An NVLink (NVLink 5) unit reported an error.",
            _NVLINK5,
        ),
        _x(
            148,
            "NVLink NVLPW_CTRL error",
            "error",
            "An NVLink (NVLink 5) unit reported an error.",
            _NVLINK5,
        ),
        _x(
            149,
            "NVLink NETIR error",
            "error",
            "An NVLink (NVLink 5) unit reported an error.",
            _NVLINK5,
        ),
        _x(
            150,
            "NVLink MSE error",
            "error",
            "An NVLink (NVLink 5) unit reported an error.",
            _NVLINK5,
        ),
    )
}


#: NVIDIA's Xid catalog (r590 "Xid Errors", docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html),
#: as NVIDIA's NVSentinel ships it (distros/kubernetes/nvsentinel/charts/gpu-health-monitor/
#: xiderrorsmapping.csv): code -> (mnemonic, NVIDIA's immediate-action bucket). Every code a
#: current driver can emit; the codes not described above get their class from the bucket.
NVIDIA_CATALOG: dict[int, tuple[str, str]] = {
    1: ("ROBUST_CHANNEL_FIFO_ERROR_FIFO_METHOD", "UNEXPECTED"),
    2: ("ROBUST_CHANNEL_FIFO_ERROR_SW_METHOD", "UNEXPECTED"),
    3: ("ROBUST_CHANNEL_FIFO_ERROR_UNK_METHOD", "UNEXPECTED"),
    4: ("ROBUST_CHANNEL_FIFO_ERROR_CHANNEL_BUSY", "UNEXPECTED"),
    5: ("ROBUST_CHANNEL_FIFO_ERROR_RUNOUT_OVERFLOW", "UNEXPECTED"),
    6: ("ROBUST_CHANNEL_FIFO_ERROR_PARSE_ERR", "UNEXPECTED"),
    7: ("ROBUST_CHANNEL_FIFO_ERROR_PTE_ERR", "UNEXPECTED"),
    8: ("ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT", "RESTART_APP"),
    9: ("ROBUST_CHANNEL_GR_ERROR_INSTANCE", "UNEXPECTED"),
    10: ("ROBUST_CHANNEL_GR_ERROR_SINGLE_STEP", "UNEXPECTED"),
    11: ("ROBUST_CHANNEL_GR_ERROR_MISSING_HW", "RESTART_APP"),
    12: ("ROBUST_CHANNEL_GR_ERROR_SW_METHOD", "UNEXPECTED"),
    13: ("ROBUST_CHANNEL_GR_EXCEPTION", "RESTART_APP"),
    14: ("ROBUST_CHANNEL_FAKE_ERROR", "IGNORE"),
    15: ("ROBUST_CHANNEL_SCANLINE_TIMEOUT", "UNEXPECTED"),
    16: ("ROBUST_CHANNEL_VBLANK_CALLBACK_TIMEOUT", "UNEXPECTED"),
    17: ("ROBUST_CHANNEL_PARAMETER_ERROR", "UNEXPECTED"),
    18: ("ROBUST_CHANNEL_BUS_MASTER_TIMEOUT_ERROR", "UNEXPECTED"),
    19: ("ROBUST_CHANNEL_DISP_MISSED_NOTIFIER", "UNEXPECTED"),
    20: ("ROBUST_CHANNEL_MPEG_ERROR_SW_METHOD", "UNEXPECTED"),
    21: ("ROBUST_CHANNEL_ME_ERROR_SW_METHOD", "UNEXPECTED"),
    22: ("ROBUST_CHANNEL_VP_ERROR_SW_METHOD", "UNEXPECTED"),
    23: ("ROBUST_CHANNEL_RC_LOGGING_ENABLED", "UNEXPECTED"),
    24: ("ROBUST_CHANNEL_GR_SEMAPHORE_TIMEOUT", "UNEXPECTED"),
    25: ("ROBUST_CHANNEL_GR_ILLEGAL_NOTIFY", "RESTART_APP"),
    26: ("ROBUST_CHANNEL_FIFO_ERROR_FBISTATE_TIMEOUT", "UNEXPECTED"),
    27: ("ROBUST_CHANNEL_VP_ERROR", "UNEXPECTED"),
    28: ("ROBUST_CHANNEL_VP2_ERROR", "UNEXPECTED"),
    29: ("ROBUST_CHANNEL_BSP_ERROR", "UNEXPECTED"),
    30: ("ROBUST_CHANNEL_BAD_ADDR_ACCESS", "UNEXPECTED"),
    31: ("ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT", "RESTART_APP"),
    32: ("ROBUST_CHANNEL_PBDMA_ERROR", "RESTART_APP"),
    33: ("ROBUST_CHANNEL_SEC_ERROR", "UNEXPECTED"),
    34: ("ROBUST_CHANNEL_MSVLD_ERROR", "UNEXPECTED"),
    35: ("ROBUST_CHANNEL_MSPDEC_ERROR", "UNEXPECTED"),
    36: ("ROBUST_CHANNEL_MSPPP_ERROR", "UNEXPECTED"),
    37: ("ROBUST_CHANNEL_FECS_ERR_UNIMP_FIRMWARE_METHOD", "IGNORE"),
    38: ("ROBUST_CHANNEL_FECS_ERR_WATCHDOG_TIMEOUT", "IGNORE"),
    39: ("ROBUST_CHANNEL_CE0_ERROR", "RESTART_APP"),
    40: ("ROBUST_CHANNEL_CE1_ERROR", "RESTART_APP"),
    41: ("ROBUST_CHANNEL_CE2_ERROR", "RESTART_APP"),
    42: ("ROBUST_CHANNEL_VIC_ERROR", "UNEXPECTED"),
    43: ("ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR", "IGNORE"),
    44: ("ROBUST_CHANNEL_GR_FAULT_DURING_CTXSW", "IGNORE"),
    45: ("ROBUST_CHANNEL_PREEMPTIVE_REMOVAL", "WORKFLOW_XID_45"),
    46: ("ROBUST_CHANNEL_GPU_TIMEOUT_ERROR", "RESET_GPU"),
    47: ("ROBUST_CHANNEL_NVENC0_ERROR", "UNEXPECTED"),
    48: ("ROBUST_CHANNEL_GPU_ECC_DBE", "WORKFLOW_XID_48"),
    49: ("SILENT_RUNNING_CONSTANT_LEVEL_SET_BY_REGISTRY", "UNEXPECTED"),
    50: ("SILENT_RUNNING_LEVEL_TRANSITION_DUE_TO_RC_ERROR", "UNEXPECTED"),
    51: ("SILENT_RUNNING_STRESS_TEST_FAILURE", "UNEXPECTED"),
    52: ("SILENT_RUNNING_LEVEL_TRANS_DUE_TO_TEMP_RISE", "UNEXPECTED"),
    53: ("SILENT_RUNNING_TEMP_REDUCED_CLOCKING", "UNEXPECTED"),
    54: ("SILENT_RUNNING_PWR_REDUCED_CLOCKING", "CHECK_MECHANICALS"),
    55: ("SILENT_RUNNING_TEMPERATURE_READ_ERROR", "UNEXPECTED"),
    56: ("DISPLAY_CHANNEL_EXCEPTION", "UNEXPECTED"),
    57: ("FB_LINK_TRAINING_FAILURE_ERROR", "UNEXPECTED"),
    58: ("FB_MEMORY_ERROR", "UNEXPECTED"),
    59: ("PMU_ERROR", "UNEXPECTED"),
    60: ("ROBUST_CHANNEL_SEC2_ERROR", "RESTART_APP"),
    61: ("PMU_BREAKPOINT", "UNEXPECTED"),
    62: ("PMU_HALT_ERROR", "RESET_GPU"),
    63: ("INFOROM_DRAM_RETIREMENT_EVENT", "IGNORE"),
    64: ("INFOROM_DRAM_RETIREMENT_FAILURE", "RESET_GPU"),
    65: ("ROBUST_CHANNEL_NVENC1_ERROR", "UNEXPECTED"),
    66: ("ROBUST_CHANNEL_FECS_ERR_REG_ACCESS_VIOLATION", "IGNORE"),
    67: ("ROBUST_CHANNEL_FECS_ERR_VERIF_VIOLATION", "IGNORE"),
    68: ("ROBUST_CHANNEL_NVDEC0_ERROR", "RESTART_APP"),
    69: ("ROBUST_CHANNEL_GR_CLASS_ERROR", "RESTART_APP"),
    70: ("ROBUST_CHANNEL_CE3_ERROR", "RESTART_APP"),
    71: ("ROBUST_CHANNEL_CE4_ERROR", "RESTART_APP"),
    72: ("ROBUST_CHANNEL_CE5_ERROR", "RESTART_APP"),
    73: ("ROBUST_CHANNEL_NVENC2_ERROR", "UNEXPECTED"),
    74: ("NVLINK_ERROR", "WORKFLOW_NVLINK_ERR"),
    75: ("ROBUST_CHANNEL_CE6_ERROR", "RESTART_APP"),
    76: ("ROBUST_CHANNEL_CE7_ERROR", "RESTART_APP"),
    77: ("ROBUST_CHANNEL_CE8_ERROR", "RESTART_APP"),
    78: ("VGPU_START_ERROR", "UPDATE_SWFW"),
    79: ("ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", "RESTART_BM"),
    80: ("PBDMA_PUSHBUFFER_CRC_MISMATCH", "RESTART_APP"),
    81: ("ROBUST_CHANNEL_VGA_SUBSYSTEM_ERROR", "UNEXPECTED"),
    82: ("ROBUST_CHANNEL_NVJPG0_ERROR", "RESTART_APP"),
    83: ("ROBUST_CHANNEL_NVDEC1_ERROR", "RESTART_APP"),
    84: ("ROBUST_CHANNEL_NVDEC2_ERROR", "RESTART_APP"),
    85: ("ROBUST_CHANNEL_CE9_ERROR", "RESTART_APP"),
    86: ("ROBUST_CHANNEL_OFA0_ERROR", "RESTART_APP"),
    87: ("NVTELEMETRY_DRIVER_REPORT", "UNEXPECTED"),
    88: ("ROBUST_CHANNEL_NVDEC3_ERROR", "RESTART_APP"),
    89: ("ROBUST_CHANNEL_NVDEC4_ERROR", "RESTART_APP"),
    90: ("LTC_ERROR", "UNEXPECTED"),
    91: ("RESERVED_XID", "UNEXPECTED"),
    92: ("EXCESSIVE_SBE_INTERRUPTS", "IGNORE"),
    93: ("INFOROM_ERASE_LIMIT_EXCEEDED", "IGNORE"),
    94: ("ROBUST_CHANNEL_CONTAINED_ERROR", "RESTART_APP"),
    95: ("ROBUST_CHANNEL_UNCONTAINED_ERROR", "RESET_GPU"),
    96: ("ROBUST_CHANNEL_NVDEC5_ERROR", "RESTART_APP"),
    97: ("ROBUST_CHANNEL_NVDEC6_ERROR", "RESTART_APP"),
    98: ("ROBUST_CHANNEL_NVDEC7_ERROR", "RESTART_APP"),
    99: ("ROBUST_CHANNEL_NVJPG1_ERROR", "RESTART_APP"),
    100: ("ROBUST_CHANNEL_NVJPG2_ERROR", "RESTART_APP"),
    101: ("ROBUST_CHANNEL_NVJPG3_ERROR", "RESTART_APP"),
    102: ("ROBUST_CHANNEL_NVJPG4_ERROR", "RESTART_APP"),
    103: ("ROBUST_CHANNEL_NVJPG5_ERROR", "RESTART_APP"),
    104: ("ROBUST_CHANNEL_NVJPG6_ERROR", "RESTART_APP"),
    105: ("ROBUST_CHANNEL_NVJPG7_ERROR", "RESTART_APP"),
    106: ("SMBPBI_TEST_MESSAGE", "IGNORE"),
    107: ("SMBPBI_TEST_MESSAGE_SILENT", "IGNORE"),
    108: ("DESTINATION_FLA_TRANSLATION_ERROR", "UNEXPECTED"),
    109: ("ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR", "RESET_GPU"),
    110: ("SEC_FAULT_ERROR", "RESET_GPU"),
    111: ("BUNDLE_ERROR_EVENT", "UNEXPECTED"),
    112: ("DISP_SUPERVISOR_ERROR", "UNEXPECTED"),
    113: ("DP_LT_FAILURE", "UNEXPECTED"),
    114: ("HEAD_RG_UNDERFLOW", "UNEXPECTED"),
    115: ("CORE_CHANNEL_REGS", "UNEXPECTED"),
    116: ("WINDOW_CHANNEL_REGS", "UNEXPECTED"),
    117: ("CURSOR_CHANNEL_REGS", "UNEXPECTED"),
    118: ("HEAD_REGS", "UNEXPECTED"),
    119: ("GSP_RPC_TIMEOUT", "RESET_GPU"),
    120: ("GSP_ERROR", "RESET_GPU"),
    121: ("C2C_ERROR", "IGNORE"),
    122: ("SPI_PMU_RPC_READ_FAIL", "UNEXPECTED"),
    123: ("SPI_PMU_RPC_WRITE_FAIL", "UNEXPECTED"),
    124: ("SPI_PMU_RPC_ERASE_FAIL", "UNEXPECTED"),
    125: ("INFOROM_FS_ERROR", "UNEXPECTED"),
    **{126 + i: (f"ROBUST_CHANNEL_CE{10 + i}_ERROR", "RESTART_APP") for i in range(10)},
    136: ("ALI_TRAINING_FAIL", "RESET_GPU"),
    137: ("NVLINK_FLA_PRIV_ERR", "IGNORE"),
    138: ("ROBUST_CHANNEL_DLA_ERROR", "UNEXPECTED"),
    139: ("ROBUST_CHANNEL_OFA1_ERROR", "RESTART_APP"),
    140: ("UNRECOVERABLE_ECC_ERROR_ESCAPE", "RESET_GPU"),
    141: ("ROBUST_CHANNEL_FAST_PATH_ERROR", "IGNORE"),
    142: ("ROBUST_CHANNEL_NVENC3_ERROR", "UNEXPECTED"),
    143: ("GPU_INIT_ERROR", "RESET_GPU"),
    144: ("NVLINK_SAW_ERROR", "WORKFLOW_NVLINK5_ERR"),
    145: ("NVLINK_RLW_ERROR", "WORKFLOW_NVLINK5_ERR"),
    146: ("NVLINK_TLW_ERROR", "WORKFLOW_NVLINK5_ERR"),
    147: ("NVLINK_TREX_ERROR", "WORKFLOW_NVLINK5_ERR"),
    148: ("NVLINK_NVLPW_CTRL_ERROR", "WORKFLOW_NVLINK5_ERR"),
    149: ("NVLINK_NETIR_ERROR", "WORKFLOW_NVLINK5_ERR"),
    150: ("NVLINK_MSE_ERROR", "WORKFLOW_NVLINK5_ERR"),
    151: ("ROBUST_CHANNEL_KEY_ROTATION_ERROR", "RESTART_VM"),
    152: ("ROBUST_CHANNEL_DLA_SMMU_ERROR", "IGNORE"),
    153: ("ROBUST_CHANNEL_DLA_TIMEOUT", "IGNORE"),
    154: ("GPU_RECOVERY_ACTION_CHANGED", "RECOVERY_ACTION"),
    155: ("NVLINK_SW_DEFINED_ERROR", "RESET_GPU"),
    156: ("RESOURCE_RETIREMENT_EVENT", "RESET_GPU"),
    157: ("RESOURCE_RETIREMENT_FAILURE", "IGNORE"),
    158: ("GPU_FATAL_TIMEOUT", "RESET_GPU"),
    159: ("ROBUST_CHANNEL_CHI_NON_DATA_ERROR", "CHECK_UVM"),
    160: ("CHANNEL_RETIREMENT_EVENT", "RESTART_BM"),
    161: ("CHANNEL_RETIREMENT_FAILURE", "IGNORE"),
    162: ("(no mnemonic published)", "RESET_GPU"),
}

#: NVIDIA's immediate-action bucket -> (nvtest severity, next step). ``UNEXPECTED`` is NVIDIA's
#: UNEXPECTED_ERR_REPORT_ISSUE / CONTACT_SUPPORT (a code NVIDIA does not expect on current GPUs).
BUCKETS: dict[str, tuple[str, str]] = {
    "RESET_GPU": ("fatal", _RESET),
    "RESTART_BM": ("fatal", "Drain the node and reboot it (a GPU reset is not enough); rerun acceptance"),
    "RESTART_VM": ("fatal", "Drain the node and restart the VM / reboot the node; rerun acceptance"),
    "WORKFLOW_XID_48": ("fatal", f"{_RESET}; {_RMA}"),
    "WORKFLOW_NVLINK_ERR": ("fatal", "Check nvidia-smi nvlink -s / -e and the fabric manager; reset; RMA if it recurs"),
    "WORKFLOW_NVLINK5_ERR": ("error", _NVLINK5),
    "RESTART_APP": ("error", _APP),
    "CHECK_UVM": ("error", "Restart the program; if it recurs, check the nvidia-uvm module and reset the GPU"),
    "WORKFLOW_XID_45": ("info", "Look at the Xid logged before it"),
    "IGNORE": ("warning", "Recorded for information; watch for it recurring beside other Xids"),
    "UNEXPECTED": (
        "error",
        "Unexpected on current GPUs: collect nvidia-bug-report.sh, reset the GPU before new work, contact NVIDIA support if it recurs",
    ),
    "CHECK_MECHANICALS": ("error", "Check the power supply and cooling of the board; reset the GPU"),
    "UPDATE_SWFW": ("error", "Update the driver / vGPU software and firmware; reset the GPU"),
    "RECOVERY_ACTION": ("info", "Follow the recovery action the line names (None: nothing to do)"),
}
#: Codes whose class here differs from NVIDIA's bucket, and why.
BUCKET_EXCEPTIONS: dict[int, str] = {
    109: "a context-switch timeout is usually a hung or very long kernel of the program (field case): warn, "
    "and fail where a hardware-fault list or a recovery action says so",
}

#: "GPU recovery action changed from <old> to <new>": the driver's request, judged by the action.
RECOVERY_ACTION_XID = 154


def _from_catalog() -> dict[int, XidInfo]:
    """The hand-described entries with NVIDIA's bucket, and every other catalog code from it."""
    out: dict[int, XidInfo] = {}
    for code, (mnemonic, bucket) in NVIDIA_CATALOG.items():
        hand = _HAND.get(code)
        if hand is not None:
            out[code] = replace(hand, resolution=bucket)
            continue
        severity, action = BUCKETS[bucket]
        if code in (14, 106, 107):  # NVIDIA's test and fake-error messages
            severity = "info"
        name = mnemonic.replace("ROBUST_CHANNEL_", "").replace("_", " ").capitalize()
        out[code] = XidInfo(
            code,
            f"{name} ({mnemonic})",
            severity,
            f"NVIDIA catalog: {mnemonic}, immediate action {bucket}.",
            action,
            NVIDIA,
            code in HARDWARE_XIDS,
            True,
            bucket,
        )
    out[RECOVERY_ACTION_XID] = XidInfo(
        RECOVERY_ACTION_XID,
        "GPU recovery action changed",
        "info",
        "The driver states the recovery the GPU now needs (None, GPU Reset Required, Node Reboot Required, "
        "Drain P2P, Drain and Reset); it follows the Xid that caused it.",
        BUCKETS["RECOVERY_ACTION"][1],
        NVIDIA,
        False,
        True,
        "RECOVERY_ACTION",
    )
    for code, hand in _HAND.items():
        out.setdefault(code, hand)
    return {code: _agreeing(info) for code, info in sorted(out.items())}


#: First steps that call an Xid harmless (a program's fault, a note): never the first step of
#: an Xid that fails acceptance.
_NO_FAULT_STEPS = ("Recorded for information", "Usually a fault of the running program")


def _agreeing(info: XidInfo) -> XidInfo:
    """``info`` with a next step that agrees with its verdict: a code the Azure or Imbue lists
    call a hardware fault fails acceptance (``xid_scan``) whatever NVIDIA's bucket, so a next
    step that calls it harmless is led by the out-of-service step. (The other direction, a
    code that only warns never leads with draining the node, holds by the table above;
    tests/playbook/test_xid_catalog.py walks both.)"""
    if info.hardware and info.severity != "fatal" and info.action.startswith(_NO_FAULT_STEPS):
        lead = (
            "A hardware fault by the Azure/Imbue Xid lists: drain the node, reset the GPU and run the GPU diagnostics"
        )
        return replace(info, action=f"{lead}; {info.action[0].lower()}{info.action[1:]}")
    return info


XID_CATALOG: dict[int, XidInfo] = _from_catalog()

#: A recovery action's words (the Xid 154 line's, ``nvidia-smi -q``'s ``GPU Recovery Action``)
#: -> (next step, playbook class). Matched case-insensitively on the first word that fits.
_RECOVERY: tuple[tuple[str, str, str], ...] = (
    ("drain and reset", "Drain the node: let peer-to-peer (NVLink) work end, then reset the GPU", "RESET"),
    ("drain", "Drain the node: stop peer-to-peer (NVLink) work on this GPU, then reset it when it is idle", "RESET"),
    ("reboot", "Drain the node and reboot it: the driver says a GPU reset is not enough", "REBOOT"),
    ("reset", "Drain the node and reset the GPU (nvidia-smi -r, or reboot)", "RESET"),
    ("flr", "Drain the node and reset the GPU (function-level reset, nvidia-smi -r, or reboot)", "RESET"),
)


#: NVML's nvmlDeviceGpuRecoveryAction_t values, for a line that gives the number only.
_RECOVERY_CODES = {"0x1": "reset", "0x2": "reboot", "0x3": "drain p2p", "0x4": "drain and reset"}


def recovery_step(action: str) -> tuple[str, str] | None:
    """The next step and playbook class for a recovery action the driver asks for; None for
    ``None`` (nothing to do). An action not known here is a reboot (fail closed)."""
    words = action.strip().lower()
    if words in ("none", "0x0", "0", ""):
        return None
    words = _RECOVERY_CODES.get(words, words)
    for key, step, cls in _RECOVERY:
        if key in words:
            return step, cls
    return (
        f"Drain the node; the driver asks for '{action}': follow NVIDIA's recovery-action guidance, reboot if unsure",
        "REBOOT",
    )


def recovery_request(code: int, action: str | None) -> str | None:
    """How one kernel-log event stands on the GPU's recovery, for every reader of it (the
    run's xid check, the gate, ``nvtest parse``): None when it names none (not Xid 154, no
    action read); ``"unreadable"`` (an Xid 154 whose action was not read: not judged);
    ``"none"`` (back to None: nothing to do); ``"asks"`` (the driver asks for ``action``:
    :func:`recovery_step` gives its next step)."""
    if code != RECOVERY_ACTION_XID and action is None:
        return None
    if action is None:
        return "unreadable"
    return "none" if recovery_step(action) is None else "asks"


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


#: NVIDIA's immediate-action buckets of a GPU that needs a reset or a reboot before it answers
#: again (NVML and CUDA calls on it block or fail until then): Xid 79 (RESTART_BM), 119 and 120
#: (RESET_GPU), 48 (WORKFLOW_XID_48), the VM restarts.
RESET_BUCKETS = frozenset({"RESET_GPU", "RESTART_BM", "RESTART_VM", "WORKFLOW_XID_48"})


def needs_reset(code: int, action: str | None = None) -> bool:
    """True when an Xid ``code`` (with the recovery ``action`` its line names, for Xid 154)
    leaves the GPU needing a reset or a reboot: a catalog code of :data:`RESET_BUCKETS` that
    the catalog calls ``fatal`` (not Xid 109, a program's hung kernel as a rule:
    :data:`BUCKET_EXCEPTIONS`), a GPU fallen off the bus, or the driver asking for a recovery
    action other than None."""
    request = recovery_request(code, action)
    if request is not None:
        return request == "asks"
    info = XID_CATALOG.get(code)
    return code == 79 or (info is not None and info.resolution in RESET_BUCKETS and info.severity == "fatal")
