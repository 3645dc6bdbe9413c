"""What a tool's reading says of the hardware it read: failures and doubtful states.

A parser reads what the tool printed; a reading can show a failed state without the tool
failing (a kernel log with Xid 119, an lspci line ``(rev ff)``, a port ``Initializing`` at LID
65535, rows pending remap). :func:`assess` classifies those states with the project's own
catalogs: the Xid catalog (:mod:`nvtest.playbook.xid`) for kernel-log events, and the states
each record already names (``unresponsive``, ``row_remap_pending``, inactive links). A
failure is a state that stops the hardware from serving (``passed: false`` with the reason);
a warning is one that may be right on some nodes (an unused port down, a nouveau binding).
A reading with nothing wrong gives neither. Pure; raises nothing.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from nvtest.parsers import ValueState
from nvtest.parsers.dmesg import KernelLog
from nvtest.parsers.ibstat import IbReport
from nvtest.parsers.lspci import LspciReport
from nvtest.parsers.nvidia_smi import SmiPlain
from nvtest.parsers.nvidia_smi_csv import SmiCsv
from nvtest.parsers.nvidia_smi_nvlink import NvLinkStatus
from nvtest.parsers.nvidia_smi_q import SmiQuery
from nvtest.playbook.host_events import judge_host_events
from nvtest.playbook.xid import describe_xid, recovery_request

__all__ = ["FAILED_DRIVER", "Assessment", "assess", "cause_code"]

#: Driver messages (``KernelLog.driver_messages`` kinds) of a GPU that is not serving.
FAILED_DRIVER = frozenset(
    {
        "rm_init_adapter_failed",
        "gsp_init_failed",
        "gsp_heartbeat_timeout",
        "reset_required",
        "memory_subsystem_error",
    }
)
_CAUSED_BY_RE = re.compile(r"caused by previous Xid (\d+)")


@dataclass(frozen=True)
class Assessment:
    """``failures``: states that fail the reading, each one line with its reason;
    ``warnings``: doubtful states. Both empty: nothing wrong was read."""

    failures: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()


def cause_code(code: int, message: str) -> int:
    """The Xid an event is judged by: the one its message says caused it (``caused by
    previous Xid N``, Xid 45 after an NVLink or ECC error), else its own ``code``."""
    m = _CAUSED_BY_RE.search(message)
    return int(m.group(1)) if m else code


def _counted(lines: Iterable[str]) -> tuple[str, ...]:
    """Each distinct line once, ``(xN)`` after those seen more than once, in first order."""
    seen = Counter(lines)
    return tuple(f"{ln} (x{n})" if n > 1 else ln for ln, n in seen.items())


def _kernel_log(log: KernelLog) -> Assessment:
    """Xid/SXid events by the catalog's severity, fallen-off-bus GPUs, the driver's no-Xid
    words of a GPU it could not bring up or that stopped answering, and the host events as the
    run judges them (:mod:`nvtest.playbook.host_events`: a recovered loss is neither)."""
    failures: list[str] = []
    warnings: list[str] = []
    for e in log.events:
        where = f" on {e.pci_address}" if e.pci_address else ""
        if e.kind == "sxid":
            sev = (e.severity or "").lower()
            line = f"SXid {e.code}{where}: {e.severity or 'severity not printed'}"
            (failures if sev.startswith("fatal") else warnings).append(line)
            continue
        if e.kind == "fallen_off_bus" or e.code == 79:
            failures.append(f"Xid 79 (GPU has fallen off the bus){where}")
            continue
        code = cause_code(e.code, e.message)
        info = describe_xid(code)
        via = f" (Xid {e.code} caused by Xid {code})" if code != e.code else ""
        line = f"Xid {code} ({info.name}, {info.severity}){via}{where}"
        request = recovery_request(e.code, e.recovery_action)  # the driver's request, judged by its action
        if request == "unreadable":
            failures.append(f"{line}: the recovery action could not be read")
            continue
        if request is not None:
            (failures if request == "asks" else warnings).append(f"{line}: recovery action {e.recovery_action}")
            continue
        if not info.known:  # as the gate (unknown) and a run (error): not judged, so not a pass
            failures.append(f"Xid {code}{via}{where}: not in nvtest's Xid catalog, not judged (not a pass)")
            continue
        if info.severity == "fatal" or info.hardware:  # as the run's xid_scan (judge_xid)
            failures.append(line)
        elif info.severity != "info":  # an info Xid is a note in a run, not a warning
            warnings.append(line)
    for d in log.driver_messages:
        where = f" on {d.pci_address}" if d.pci_address else ""
        (failures if d.kind in FAILED_DRIVER else warnings).append(f"driver: {d.kind.replace('_', ' ')}{where}")
    for j in judge_host_events(log.host_events):  # the run's xid_scan judgement (a note: neither)
        if j.verdict in ("fail", "warn"):
            (failures if j.verdict == "fail" else warnings).extend([j.line] * j.times)
    return Assessment(_counted(failures), _counted(warnings))


def _lspci(report: LspciReport) -> Assessment:
    """``(rev ff)``: config space reads all ones, the device fell off the bus."""
    return Assessment(
        tuple(
            f"{d.slot} {d.device_name or d.class_name or 'device'}: revision ff, config space "
            "reads all ones (fell off the bus)"
            for d in report.devices
            if d.unresponsive
        )
    )


def _ib(report: IbReport) -> Assessment:
    """A port whose link is up but not Active (no subnet manager, LID 65535) fails; a port
    down (Polling, Disabled) may be an unused one and is a warning."""
    failures: list[str] = []
    warnings: list[str] = []
    for ca in report.cas:
        for p in ca.ports:
            state, phys = (p.state or "?"), (p.physical_state or "?")
            if state.lower() == "active":
                continue
            line = f"{ca.name} port {p.port}: state {state}, physical {phys}"
            (failures if phys.lower() == "linkup" else warnings).append(line)
    return Assessment(tuple(failures), tuple(warnings))


def _nvlink(status: NvLinkStatus) -> Assessment:
    """Inactive links on a GPU whose other links are up: a degraded fabric."""
    return Assessment(
        tuple(
            f"GPU {g.index}: NVLink(s) {', '.join(map(str, g.inactive_links))} inactive "
            f"({g.active_count} of {len(g.links)} active)"
            for g in status.gpus
            if g.inactive_links and g.active_count
        ),
        tuple(f"GPU {g.index}: no active NVLink" for g in status.gpus if g.links and not g.active_count),
    )


def _lost(lost_gpus: Iterable[str]) -> list[str]:
    """nvidia-smi's ``Unable to determine the device handle``: a GPU it lists but cannot reach."""
    return [f"GPU {bus}: nvidia-smi cannot reach it (device handle lost)" for bus in lost_gpus]


def _fault_values(where: str, values: Iterable[tuple[str, object]]) -> list[str]:
    """A line for the fields of one GPU that show a fault state (``ERR!``, ``[GPU requires
    reset]``, ``[Unknown Error]``: :attr:`ValueState.is_fault`)."""
    bad = [(n, v) for n, v in values if isinstance(v, ValueState) and v.is_fault]
    if not bad:
        return []
    return [f"{where}: {', '.join(f'{n} {v.value}' for n, v in bad)}"]


def _smi_plain(s: SmiPlain) -> Assessment:
    """A GPU row showing ``ERR!``, ``Unknown Error`` or ``GPU requires reset``; a lost GPU."""
    failures = _lost(s.lost_gpus)
    for g in s.gpus:
        failures += _fault_values(f"GPU {g.index} {g.bus_id}", ((n, getattr(g, n)) for n in g.faults))
    return Assessment(tuple(failures))


def _smi_csv(c: SmiCsv) -> Assessment:
    """A ``--query-gpu`` row holding a fault state; a lost GPU."""
    failures = _lost(c.lost_gpus)
    for i in c.faulty_rows:
        failures += _fault_values(f"row {i + 1} (line {c.rows[i].line})", c.row_dict(i).items())
    return Assessment(tuple(failures))


def _smi_query(q: SmiQuery) -> Assessment:
    """Row remapping pending (a reset is due) or failed (RMA), a value in a fault state, a
    lost GPU; page retirement pending (a reboot retires them) is doubtful."""
    failures = _lost(q.lost_gpus)
    failures += [f"{g.pci_bus_id}: row remapping failed" for g in q.gpus if g.row_remap_failed]
    failures += [f"{g.pci_bus_id}: row remap pending (GPU reset required)" for g in q.gpus if g.row_remap_pending]
    for g in q.gpus:
        failures += _fault_values(g.pci_bus_id, vars(g).items())
    warnings = [
        f"{g.pci_bus_id}: retired pages pending (a reboot retires them)" for g in q.gpus if g.page_retirement_pending
    ]
    return Assessment(tuple(failures), tuple(warnings))


def assess(record: Any) -> Assessment:
    """The failed and doubtful states ``record`` (any parser's record) shows; an empty
    :class:`Assessment` for a record of a tool whose readings carry no such state."""
    if isinstance(record, KernelLog):
        return _kernel_log(record)
    if isinstance(record, LspciReport):
        return _lspci(record)
    if isinstance(record, IbReport):
        return _ib(record)
    if isinstance(record, NvLinkStatus):
        return _nvlink(record)
    if isinstance(record, SmiQuery):
        return _smi_query(record)
    if isinstance(record, SmiPlain):
        return _smi_plain(record)
    if isinstance(record, SmiCsv):
        return _smi_csv(record)
    return Assessment()
