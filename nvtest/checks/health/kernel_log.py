"""Xid and SXid events in the kernel log, judged with the Xid catalog; and the host's own events.

Input: ``dmesg`` (or ``journalctl -k`` where dmesg is restricted) read by
:mod:`nvtest.parsers.dmesg`. Verdicts (sku-reference.md "XID"; field case P10):

- an Xid the catalog calls ``fatal``, or a hardware-fault Xid (the Azure and
  Imbue lists), or a GPU fallen off the bus: fail, with the catalog's action;
- a recovery action other than ``None`` (Xid 154 "GPU recovery action changed from 0x0
  (None) to 0x2 (Node Reboot Required)"): fail, naming the action and its next step
  (reset, reboot, drain);
- an Xid code the catalog does not know, or an Xid 154 whose action cannot be read:
  ``error`` (not judged), never a warning;
- other Xids (``error``/``warning``, e.g. 13, 31, 43: usually the program): warn;
- ``info`` Xids (consequences of an earlier one): noted;
- NVSwitch SXids: ``Fatal`` fail, ``Non-fatal`` warn.

- the NVIDIA driver refusing or failing to bind to the devices on the bus (``NVRM: The
  NVIDIA probe routine was not called for N device(s)``, ``No NVIDIA graphics adapter
  probed``, ``NVRM: API mismatch``): fail with the kernel's words (the cause behind an
  nvidia-smi that cannot talk to the driver).

- host events (:mod:`nvtest.playbook.host_events`): a hung task (``INFO: task ... blocked for
  more than 120 seconds``) warns, naming the storage client its call trace waits in; an NFS
  server ``not responding`` with no ``OK`` after it, a Lustre connection lost or eviction with no
  ``Connection restored``, a GPFS membership loss, disk failure or forced unmount fail (a loss
  followed by its recovery is a note: recovered, not failing); an uncorrected machine check or
  EDAC ``UE`` fails; corrected ones (``CE``, ``Machine check events logged``) warn.

The log covers the time since boot (or what the ring buffer still holds), not
just this run. A log that cannot be read is an ``error`` with the reason, never a pass, on
every node: on a node whose PCI bus proves no NVIDIA device (a login or storage node) the
GPU part does not apply (a note quoting the bus's words) and the host events are still
judged, so a log that cannot be read is an error there too (the host events were not read).

Metrics: ``xid_events`` and ``fatal_xid_events`` (count).
"""

from __future__ import annotations

from dataclasses import replace

from nvtest.checks.health import Outcome
from nvtest.config.thresholds import SkuProfile
from nvtest.errors import ParseError, ProbeError
from nvtest.parsers import dmesg
from nvtest.playbook.host_events import judge_host_events
from nvtest.playbook.readings import FAILED_DRIVER, cause_code
from nvtest.playbook.xid import describe_xid, recovery_request, recovery_step
from nvtest.session.expect import expected_gpus, expected_nvswitches
from nvtest.session.facts import NodeFacts
from nvtest.session.kernel_log import (
    KERNEL_LOG_KEY,
    KERNEL_LOG_NEEDS,
    KERNEL_LOG_SCRIPT,
    UNREADABLE,
    split_probe,
)

__all__ = [
    "DRIVER_BINDING",
    "KERNEL_LOG_KEY",
    "KERNEL_LOG_NEEDS",
    "KERNEL_LOG_SCRIPT",
    "UNREADABLE",
    "driver_binding",
    "judge_xid",
    "nvidia_absent",
    "split_probe",
    "xid_scan",
]


def nvidia_absent(facts: NodeFacts, sku: SkuProfile | None) -> str | None:
    """Whether the GPU part of the scan applies: None where the node must have NVIDIA GPUs or
    NVSwitches (PCI bus, SKU, the tools' reports); the bus's words where it proves there is none
    (a CPU-only node: login, storage, service). The host events of the log are judged on every
    node either way (:func:`xid_scan` ``no_gpu``); the kernel log is read by a shell probe, not
    a GPU tool, so nothing here depends on the GPU tools.

    Raises:
        ProbeError: none expected and their absence not proven (the bus could not be read).
    """
    gpus, switches = expected_gpus(facts, sku), expected_nvswitches(facts, sku)
    if gpus.count or switches.count:
        return None
    if gpus.absent is None:
        raise ProbeError(gpus.unknown or "absence of NVIDIA devices not proven")
    return gpus.absent


#: NVRM lines that say the driver did not take the devices (NVIDIA driver 4xx-5xx wording).
DRIVER_BINDING = (
    "probe routine was not called",
    "no nvidia graphics adapter probed",
    "nvrm: api mismatch",
    "rminitadapter failed",
    "failed to allocate nvrm",
    "obtained ownership of the nvidia device",
)


def driver_binding(lines: list[str]) -> list[str]:
    """The kernel's own lines (timestamps cut, continuation lines joined) of the driver
    refusing or failing to bind to devices (:data:`DRIVER_BINDING`)."""
    import re

    joined: list[str] = []
    for ln in lines:
        body = re.sub(r"^\[[^\]]*\]\s*", "", ln)
        if joined and not ln.startswith("[") and body.startswith("NVRM:") and not joined[-1].endswith("."):
            joined[-1] += " " + body.removeprefix("NVRM:").strip()
        else:
            joined.append(body)
    return [j for j in joined if any(k in j.lower() for k in DRIVER_BINDING)]


def judge_xid(e: dmesg.KernelEvent, times: int = 1) -> tuple[str, str]:
    """One Xid event judged with the catalog: (``fail``, ``warn``, ``note``, ``unknown`` or
    ``pass``, the line saying so with its next step). ``times``: how often it was logged.

    A recovery action other than ``None`` (Xid 154) fails, naming the action and its next
    step; an Xid 154 whose action cannot be read, and a code the catalog does not know, are
    ``unknown`` (not measured: ``error`` in a run); a fatal or hardware-fault code fails; an
    ``info`` one is a note; the others warn.
    """
    info = describe_xid(e.code)
    where = f"GPU {e.pci_address or '?'}"
    mult = f" x{times}" if times > 1 else ""
    request = recovery_request(e.code, e.recovery_action)
    if request == "unreadable":
        return "unknown", f"{where}: Xid {e.code}{mult} {info.name}, action not readable: {e.message[:120]}"
    if request == "none":
        return "note", f"{where}: Xid {e.code}{mult}: recovery action back to None"
    if request == "asks" and (step := recovery_step(e.recovery_action or "")) is not None:
        return (
            "fail",
            f"{where}: Xid {e.code}{mult}: the driver asks for recovery action '{e.recovery_action}': {step[0]}",
        )
    if not info.known:
        return "unknown", (
            f"{where}: Xid {e.code}{mult} is not in nvtest's Xid catalog: not judged ({e.message[:100]}); {info.action}"
        )
    line = f"{where} fell off the bus (Xid 79){mult}" if e.code == 79 else f"{where}: Xid {e.code}{mult} {info.name}"
    if info.severity == "fatal" or info.hardware:
        return "fail", f"{line}: {info.action}"
    if info.severity == "info":
        return "note", f"{line} ({info.cause})"
    return "warn", f"{line}: {info.action}"


def xid_scan(text: str, source: str = "dmesg", *, storage: str = "fail", no_gpu: str | None = None) -> Outcome:
    """Judge the GPU events and the host events of one kernel log (see the module doc).

    ``source`` names where the text came from, for the messages. ``storage``: the verdict of a
    current storage-client loss (``fail``; the gate passes ``warn``: a shared server's outage
    is seen by every node at once and must not drain a fleet by itself). ``no_gpu``: the PCI
    bus's words where it proves the node has no NVIDIA device (:func:`nvidia_absent`): the
    GPU part (Xid, SXid, driver binding, their metrics) is then not applicable, said in a note,
    and only the host events are judged.
    """
    out = Outcome()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if source == UNREADABLE or not lines:
        why = " | ".join(lines)[:300] or "no output"
        out.error = (
            f"kernel log not readable ({why}); run as root, add the user to group adm/systemd-journal "
            "or set kernel.dmesg_restrict=0"
        )
        return out
    try:
        log = dmesg.parse(text)
    except ParseError as exc:
        out.error = f"kernel log not readable ({source}): {exc}"
        return out
    if log.failure is not None:  # dmesg's own words: the log was not read, nothing proven
        out.error = f"kernel log not readable ({source}): {log.failure.message}"
        return out
    if no_gpu is not None:
        out.note(f"GPU part not applicable: {no_gpu}: no Xid to look for; host events judged ({source}, since boot)")
        _host_events(out, log, storage)
        out.details["kernel_log"] = {"source": source, "gpu": "not applicable", "host_events": _host_counts(log)}
        return out
    for said in driver_binding(lines):
        out.fail(f"the NVIDIA driver did not take the devices: {said}")
    xids = [e for e in log.events if e.kind != "sxid"]
    sxids = [e for e in log.events if e.kind == "sxid"]
    fatal = 0
    unknown: list[str] = []
    seen: set[tuple[int, str | None, str | None]] = set()
    for e in xids:
        key = (e.code, e.pci_address, e.recovery_action)
        if key in seen:
            continue
        seen.add(key)
        n = sum(1 for x in xids if (x.code, x.pci_address, x.recovery_action) == key)
        cause = cause_code(e.code, e.message)  # Xid 45 "caused by previous Xid N": judged as N
        verdict, line = judge_xid(replace(e, code=cause) if cause != e.code else e, n)
        if cause != e.code:
            line += f" (logged as Xid {e.code}, caused by Xid {cause})"
        if verdict == "fail":
            fatal += n
            out.fail(line)
            out.cause = out.cause or f"xid:{cause}"  # the first failing Xid's code (as judged)
        elif verdict == "unknown":
            unknown.append(line)
        elif verdict == "note":
            out.note(line)
        elif verdict == "warn":
            out.warn(line)
    # a GPU the driver could not bring up or that stopped answering (GSP heartbeat, reset
    # required): a failure where no Xid failed the log; beside a failing Xid (whose catalog
    # action comes first) a note
    for kind, gpu in dict.fromkeys((d.kind, d.pci_address) for d in log.driver_messages if d.kind in FAILED_DRIVER):
        (out.note if fatal else out.fail)(f"the NVIDIA driver: {kind.replace('_', ' ')}{' on ' + gpu if gpu else ''}")
    if unknown:
        out.error = "; ".join(unknown)
    for e in sxids:
        line = f"NVSwitch {e.pci_address or '?'}: SXid {e.code} ({e.severity or 'severity not printed'}): {e.message[:120]}"
        if e.severity == "fatal":
            fatal += 1
            out.fail(f"{line}: reset the NVSwitch tray / reboot; RMA if it recurs")
        else:
            out.warn(line)
    if log.probe_failures:
        out.fail(f"the NVIDIA driver failed to probe {log.probe_failures} device(s)")
    _host_events(out, log, storage)
    out.measure("xid_events", len(xids), "count")
    out.measure("fatal_xid_events", fatal, "count")
    out.details["kernel_log"] = {
        "source": source,
        "xid_codes": list(log.xid_codes),
        "sxid_events": len(sxids),
        "host_events": _host_counts(log),
    }
    if not log.events:
        out.note(f"no Xid or SXid event in the kernel log ({source}, since boot)")
    return out


def _host_events(out: Outcome, log: dmesg.KernelLog, storage: str) -> None:
    """The host events of ``log`` judged onto ``out`` (:mod:`nvtest.playbook.host_events`), each
    with its cause key."""
    for j in judge_host_events(log.host_events, storage=storage):
        said = j.line + (f" (x{j.times})" if j.times > 1 else "")
        if j.verdict == "fail":
            out.fail(said, j.cause)
        elif j.verdict == "warn":
            out.warn(said, j.cause)
        else:
            out.note(said)


def _host_counts(log: dmesg.KernelLog) -> dict[str, int]:
    """class -> how many host events of that class ``log`` holds."""
    return {c: sum(1 for e in log.host_events if e.cls == c) for c in sorted({e.cls for e in log.host_events})}
