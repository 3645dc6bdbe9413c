"""Diagnosis: the likely cause of a failing or erroring (check, node) result, and what to do.

A catalog of rules in code, tried in order on the result's check name and
reason text (and, for Xids, the Xid catalog :mod:`nvtest.playbook.xid`); the
first that matches gives::

    {"cause": "...", "action": "...", "class": "RMA|RESET|REBOOT|RETEST|CONFIG|CABLING|FIRMWARE|MONITOR"}

Classes (the action class of sku-reference.md's design lessons):

========  =================================================================
RMA       replace the part (after the action's confirmation steps)
RESET     reset the GPU (or reboot), then rerun acceptance
REBOOT    reboot or power-cycle the node
RETEST    nothing proven wrong with the hardware: rerun, look at the log
CONFIG    software or configuration: install, enable, pin, set
CABLING   cable, optic, riser, seating, switch port
FIRMWARE  VBIOS, HCA or GSP firmware: align or update
MONITOR   keep in service, watch the counters or the program
========  =================================================================
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nvtest.playbook.config_audit import CONFIG_CHECKS
from nvtest.playbook.xid import describe_xid

__all__ = ["CLASSES", "RULES", "Diagnosis", "Rule", "diagnose"]

CLASSES = ("RMA", "RESET", "REBOOT", "RETEST", "CONFIG", "CABLING", "FIRMWARE", "MONITOR")


@dataclass(frozen=True)
class Diagnosis:
    """Cause, next action and action class of one result."""

    cause: str
    action: str
    cls: str
    rule: str

    def to_json(self) -> dict[str, str]:
        return {"cause": self.cause, "action": self.action, "class": self.cls, "rule": self.rule}


@dataclass(frozen=True)
class Rule:
    """Matches when ``pattern`` is found in the reason and the check is in ``checks`` (None: any)."""

    name: str
    pattern: str
    cause: str
    action: str
    cls: str
    checks: frozenset[str] | None = None
    verdicts: frozenset[str] = frozenset({"fail", "error"})

    def matches(self, check: str, verdict: str, reason: str) -> bool:
        if self.checks is not None and check not in self.checks:
            return False
        return (
            verdict in self.verdicts and re.search(self.pattern, reason, re.IGNORECASE) is not None
        )


def _r(
    name: str,
    pattern: str,
    cause: str,
    action: str,
    cls: str,
    checks: tuple[str, ...] | None = None,
    verdicts: tuple[str, ...] = ("fail", "error"),
) -> Rule:
    assert cls in CLASSES, cls
    return Rule(
        name,
        pattern,
        cause,
        action,
        cls,
        frozenset(checks) if checks else None,
        frozenset(verdicts),
    )


RULES: tuple[Rule, ...] = (
    _r(
        "node_unreachable",
        r"node unreachable|unreachable|connection refused|no route to host|exit(ed)? 255|rc 255",
        "the node did not answer over the transport (down, network, sshd/slurmd)",
        "check power, network and the ssh/slurm daemon; then `nvtest run --rerun-failed RUN_DIR`",
        "RETEST",
    ),
    _r(
        "probe_timeout",
        r"timed? ?out|timeout|deadline",
        "the probe exceeded its time limit: a hung tool "
        "(dcgmi, nccl-tests) or a wedged driver (nvidia-smi in D state)",
        "read the log; if nvidia-smi itself hangs, reboot the node; else rerun with --timeout-scale 2",
        "RETEST",
        verdicts=("error",),
    ),
    _r(
        "fabric_manager",
        r"\b802\b|system not yet initiali[sz]ed|SYSTEM_NOT_READY|SystemNotReady|fabric ?manager"
        r"|fabric state|fabricmanager",
        "nvidia-fabricmanager not running or not matching the driver: CUDA init fails with error 802 on NVSwitch systems",
        "install the fabric manager package of exactly the driver's version, `systemctl enable --now "
        "nvidia-fabricmanager`, then rerun",
        "CONFIG",
    ),
    _r(
        "driver_library_mismatch",
        r"driver/library version mismatch|NVML library version mismatch",
        "user-space NVIDIA libraries differ from the loaded kernel module (driver upgraded without a reboot)",
        "reboot the node so the new kernel module loads; rerun",
        "REBOOT",
    ),
    _r(
        "cuda_driver_insufficient",
        r"driver version is insufficient for CUDA runtime|insufficient.*CUDA",
        "the test binary or container was built for a newer CUDA than the installed driver supports",
        "install a driver that supports the runtime, or use a build for the installed CUDA; the hardware is not at fault",
        "CONFIG",
    ),
    _r(
        "remap_failure",
        r"row remapping failure|remapping failure",
        "GPU memory ran out of spare rows (row remapping failure)",
        "drain the node and RMA the GPU/board",
        "RMA",
    ),
    _r(
        "remap_pending",
        r"remap pending|retirement pending",
        "a row remap or page retirement is pending: it applies at the next GPU reset",
        "reset the GPU or reboot, then rerun acceptance (no hardware service needed unless it recurs)",
        "RESET",
    ),
    _r(
        "ecc_uncorrectable",
        r"uncorrectable ECC|Xid 48\b|Xid 9[45]\b",
        "uncorrectable GPU memory (ECC) errors",
        "reset the GPU and rerun; RMA if errors recur",
        "RESET",
    ),
    _r(
        "ecc_disabled",
        r"ECC mode (disabled|off)",
        "ECC is disabled on the GPU",
        "enable it (`nvidia-smi -e 1`) and reboot; rerun",
        "CONFIG",
    ),
    _r(
        "lost_gpu",
        r"fell off the bus|fallen off the bus|Xid 79|GPU lost|device handle|GPUs visible to nvidia-smi"
        r"|nvidia-smi reports no GPU|announces \d+ GPUs",
        "a GPU stopped answering on PCIe (lost / fallen off the bus)",
        "drain; power-cycle the node (reseat the GPU if it stays missing); RMA if it happens again",
        "REBOOT",
    ),
    _r(
        "nccl_wrong",
        r"wrong results|#wrong|out of bounds|data corruption",
        "collective or GEMM results were wrong: silent data corruption on a GPU, NVLink or NIC path",
        "isolate the node; rerun with `-c N` per GPU pair to find the part; RMA it (never retried into a pass)",
        "RMA",
    ),
    _r(
        "pcie_downgrade",
        r"PCIe x\d+ of x\d+|trained x\d+|expects x\d+|capable of Gen|link width downgraded",
        "a PCIe link trained narrower (or slower capable) than the device and slot allow",
        "reseat the card, check the riser/cable and the slot; check the BIOS PCIe settings",
        "CABLING",
        ("pcie_link", "gpus"),
    ),
    _r(
        "nvlink_inactive",
        r"links? .*inactive|links active|no NVLink|links up below",
        "NVLink links are inactive or slow",
        "reset the GPUs (or reboot) and check the fabric manager; "
        "RMA the baseboard if links stay down",
        "RESET",
        ("nvlink",),
    ),
    _r(
        "ib_polling",
        r"Polling|no link partner",
        "an IB port has no link partner (cable, optic or switch port down)",
        "check the cable and optic, and that the switch port is enabled",
        "CABLING",
    ),
    _r(
        "ib_not_active",
        r"LinkUp|not activated|no LID|subnet manager",
        "an IB port trained but was not activated (subnet manager, pkey, VF GUID)",
        "check the subnet manager sees the port and its partition configuration",
        "CONFIG",
    ),
    _r(
        "ib_down",
        r"HCA|port \d+: (state|Disabled)|rate .* Gb/s <",
        "an IB/RoCE port is down, disabled or below its rate",
        "check the cable, the port configuration (`ibportstate`) and the switch",
        "CABLING",
        ("ib_ports",),
    ),
    _r(
        "throttling",
        r"throttl|hw_slowdown|thermal",
        "clocks were throttled under load (cooling, inlet temperature or power delivery)",
        "check fans, airflow, inlet temperature and PSUs; rerun; RMA a GPU that throttles alone",
        "MONITOR",
    ),
    _r(
        "firmware_drift",
        r"^(vbios|hca_firmware)|\b(vbios|hca_firmware)\b.*(has|differs)",
        "firmware differs from the rest of the fleet",
        "flash the fleet's firmware version; rerun",
        "FIRMWARE",
        ("sw_uniformity",),
    ),
    _r(
        "software_drift",
        r"has .*nodes have|differs across nodes|older than",
        "the software stack differs from the fleet or the SKU (driver, CUDA, NCCL, plugin, OFED)",
        "install the fleet's versions (pin the packages); rerun",
        "CONFIG",
    ),
    _r(
        "dcgm",
        r"dcgmi .* failed",
        "DCGM diagnostics found a fault",
        "read the dcgmi log for the GPU and test; reset and rerun; RMA if it repeats",
        "RESET",
        ("dcgm_diag",),
    ),
    _r(
        "dcgm_skipped",
        r"skipped|error code",
        "DCGM did not really run a test (Skip or an error code is not a pass)",
        "check DCGM's is_allowed settings and GPU preconditions (idle GPUs, no MIG); rerun",
        "CONFIG",
        ("dcgm_diag",),
    ),
    _r(
        "unit_mismatch",
        r"unit mismatch",
        "a threshold is in another unit than the measurement",
        "fix the SKU profile or overlay (GB/s vs Gb/s)",
        "CONFIG",
    ),
    _r(
        "below_floor",
        r"< min|> max",
        "a measurement is outside the SKU threshold",
        "rerun; compare with the fleet statistics; check clocks, throttling and links of this node",
        "RETEST",
        verdicts=("fail",),
    ),
    _r(
        "no_measurement",
        r"no valid measurement|printed no|unreadable|ParseError|ProbeError|could not",
        "the probe could not produce a valid measurement",
        "read the log; fix the tool or environment; rerun",
        "RETEST",
        verdicts=("error",),
    ),
)

_XID_RE = re.compile(r"Xid (\d+)")


def _xid_class(code: int) -> str:
    if code in (64, 140, 143):
        return "RMA"
    if code in (119, 120, 122, 123, 124):
        return "FIRMWARE"
    if code == 74 or 144 <= code <= 150:
        return "RESET"
    if code in (13, 31, 43, 45, 92, 121):
        return "MONITOR"
    return "RESET"


def _xid(reason: str) -> Diagnosis | None:
    m = _XID_RE.search(reason)
    if not m:
        return None
    info = describe_xid(int(m.group(1)))
    return Diagnosis(
        f"Xid {info.code}: {info.name}. {info.cause}",
        info.action,
        _xid_class(info.code),
        f"xid_{info.code}",
    )


GENERIC: dict[str, Diagnosis] = {
    "fail": Diagnosis(
        "the check failed on this node",
        "read the reason and the log; rerun the check",
        "RETEST",
        "generic_fail",
    ),
    "error": Diagnosis(
        "the check could not produce a valid result on this node",
        "read the log; fix the tool or environment; rerun",
        "RETEST",
        "generic_error",
    ),
}


def diagnose(result: Mapping[str, Any], systemic: bool = False) -> Diagnosis | None:
    """The diagnosis of one results.json result (None unless it failed or errored).

    ``systemic``: every node of the SKU fails this check (thresholds or
    environment suspect, before the hardware).
    """
    verdict = str(result.get("verdict"))
    if verdict not in ("fail", "error"):
        return None
    check = str(result.get("check"))
    reason = str(result.get("reason") or "")
    if systemic and verdict == "fail":
        return Diagnosis(
            "every node of this SKU fails this check: the thresholds, the recipe or the environment are suspect",
            "compare with a known-good node; review the SKU thresholds and software stack before filing RMAs",
            "CONFIG",
            "systemic",
        )
    first = [r for r in RULES if r.name in ("node_unreachable", "probe_timeout")]
    for rule in first:
        if rule.matches(check, verdict, reason):
            return Diagnosis(rule.cause, rule.action, rule.cls, rule.name)
    audit = CONFIG_CHECKS.get(check) if verdict == "fail" else None
    if audit is not None:
        return Diagnosis(audit.cause, audit.action, audit.cls, f"config_{check}")
    if check == "xid_scan" or "Xid" in reason:
        x = _xid(reason)
        if x is not None and not re.search(r"fell off the bus|Xid 79|Xid 48|Xid 9[45]", reason):
            return x
    for rule in RULES:
        if rule.matches(check, verdict, reason):
            return Diagnosis(rule.cause, rule.action, rule.cls, rule.name)
    return GENERIC[verdict]
