"""Parser for the kernel log (``dmesg``, ``dmesg -T``/``--ctime``, ``journalctl -k``): GPU events.

Finds, per event, the NVIDIA driver's ``NVRM: Xid (PCI:0000:cb:00): 13, pid=..., name=..., msg``
lines (every driver since ~2012, with or without ``PCI:`` and pid/name), NVSwitch ``SXid``
lines (``nvidia-nvswitchN: SXid (PCI:...): 12028, Non-fatal, ...``), and "fallen off the bus"
in its one-line Xid 79 form and in the multi-line no-Xid form of newer drivers (570+: ``The
NVIDIA GPU 0000:b3:00.0`` / ``(PCI ID: 10de:26b5) installed in this system has`` / ``fallen off
the bus ...``), which is reported as code 79. Continuation lines without a timestamp are joined
to the line before them.

Timestamps: ``timestamp_raw`` is the prefix as printed (``1843.308145``, ``Fri Aug 30 11:43:09
2024``, ``2024-08-30T11:43:09,123456+00:00`` or a journal ``Aug 30 11:43:09``);
``timestamp_s`` is seconds since boot when the raw value is numeric, else None.
A log with no GPU event is valid and gives an empty ``events``.

The driver's own words of a GPU it could not bring up or that stopped answering, which carry
no Xid (``RmInitAdapter failed!``, ``rm_init_adapter failed``, ``No NVIDIA graphics adapter
probed``, ``The NVIDIA probe routine was not called``, GSP ``Heartbeat timed out`` / ``GSP
Timeout``, ``NV_ERR_RESET_REQUIRED``), are kept in ``driver_messages`` (same record as events;
``kind`` names the message, ``code`` is 0). ``failure`` is dmesg's own failure (``dmesg: read
kernel buffer failed: Operation not permitted``: ``could_not_start``). Text with no kernel-log
line at all (no dmesg/journal timestamp, no ``NVRM:``/``SXid``/``kernel:`` line) is not a
kernel log (ParseError). ``effective``: the timestamp format and the first and last timestamps
read (the window of the log that was read), the lines read, the driver version.

Host events (``host_events``, :class:`HostEvent`), each with a class and a severity: hung tasks
(``INFO: task python:4242 blocked for more than 120 seconds.``, with the storage client or the
NVIDIA driver module its call trace names), the NFS client (``nfs: server X not responding, still trying`` / ``timed out``,
then ``nfs: server X OK``), the Lustre client (``<import>: Connection to <target> (at <nid>) was
lost; ...``, ``This client was evicted by <target>``, ``Connection restored to``, other
``LustreError:`` lines), GPFS / Storage Scale (``mmfs``/``GPFS`` lines: ``Lost membership in
cluster``, ``Disk failure``, ``Unmounting file system``, the daemon shutting down abnormally),
machine checks (``mce: [Hardware Error]: Machine check events logged``, ``CPU n: Machine Check
[Exception]: 0 Bank b: <MCi_STATUS>`` read by its UC bit, ``Fatal machine check``, ``Memory
failure: ...``, APEI ``[Hardware Error]: event severity: corrected|recoverable|fatal``) and EDAC
(``EDAC MC1: 262 CE memory read error on ...`` / ``UE``). A loss followed by its recovery
(``nfs: server X OK``, Lustre's ``Connection restored`` on the same import) carries
``recovered_line``: the state is recovered, not current. Sources of the wordings: Linux
fs/nfs/client.c and kernel/hung_task.c, Lustre ptlrpc/import.c, IBM Storage Scale problem
determination guide, arch/x86/kernel/cpu/mce/core.c, drivers/edac/edac_mc.c (see the corpus
INDEX.md for the public logs each was read on).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace

from nvtest.parsers._common import (
    FailureKind,
    FailureTable,
    LineDispatch,
    ParseError,
    ToolFailure,
    ToolRecord,
    effective,
    effective_field,
    guarded,
    not_tool_output,
    numbered_lines,
)

TOOL = "dmesg"
DESCRIPTION = (
    "kernel log (dmesg, dmesg -T, journalctl -k): Xid, SXid and fallen-off-the-bus events; hung tasks, "
    "NFS/Lustre/GPFS client state, machine checks and EDAC"
)

__all__ = [
    "DRIVER_MESSAGES",
    "FAILURES",
    "HOST_CLASSES",
    "HostEvent",
    "KernelEvent",
    "KernelLog",
    "detect",
    "parse",
]

#: Line prefixes that are dmesg's own (``dmesg --time-format=iso``): never removed as a collector's.
OWN_PREFIXES = frozenset({"an ISO timestamp"})

FALLEN_OFF_BUS_XID = 79

#: dmesg's and journalctl's own failure wordings (util-linux 2.x, systemd 2xx).
FAILURES = FailureTable(
    [
        (
            re.compile(r"dmesg: read kernel buffer failed: (?P<code>.+)$"),
            FailureKind.COULD_NOT_START,
            "util-linux dmesg with kernel.dmesg_restrict=1",
        ),
        (
            re.compile(r"No journal files were (?:found|opened due to insufficient permissions)"),
            FailureKind.COULD_NOT_START,
            "journalctl without access to the journal",
        ),
    ],
    binaries=r"dmesg|journalctl",
)

#: The NVIDIA driver's messages of a GPU it could not bring up or that stopped answering, with
#: no Xid: ``(kind, regex)``, drivers 331-595 (the open module's GSP wordings from 515).
DRIVER_MESSAGES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("rm_init_adapter_failed", re.compile(r"RmInitAdapter failed!|rm_init_adapter failed")),
    (
        "gsp_init_failed",
        re.compile(r"Cannot initialize GSP firmware RM|failed to wait for GFW(?:_BOOT| boot complete)"),
    ),
    ("no_adapter_probed", re.compile(r"No NVIDIA graphics adapter (?:probed|found)")),
    ("probe_not_called", re.compile(r"probe routine was not called for \d+ device")),
    (
        "gsp_heartbeat_timeout",
        re.compile(r"Heartbeat timed out|GSP Timeout|Timeout after \d+s of waiting for RPC response"),
    ),
    ("reset_required", re.compile(r"NV_ERR_RESET_REQUIRED")),
    ("memory_subsystem_error", re.compile(r"Memory Subsystem Error detected")),
)
_ANY_DRIVER_MESSAGE_RE = re.compile("|".join(f"(?:{rx.pattern})" for _, rx in DRIVER_MESSAGES))
#: A line that is a kernel log's: a dmesg timestamp (seconds or ctime), an ISO or journal
#: ``kernel:`` prefix, or an NVRM/SXid message (``dmesg -t``, kmsg).
_KERNEL_LINE_RE = re.compile(
    r"^\[\s*\d+\.\d+\]|^\[[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}\]"
    r"|\bkernel: |NVRM: |SXid \("
)


@dataclass(frozen=True)
class KernelEvent:
    """One GPU event. ``kind`` is ``xid``, ``sxid`` or ``fallen_off_bus`` (code 79, no Xid line).
    ``recovery_action``: the action a line names (Xid 154 ``GPU recovery action changed from
    0x0 (None) to 0x2 (Node Reboot Required)`` -> ``Node Reboot Required``; ``0x2`` when the
    line gives no words), else None."""

    line: int
    kind: str
    code: int
    pci_address: str | None
    message: str
    timestamp_raw: str | None = None
    timestamp_s: float | None = None
    pid: int | None = None
    process_name: str | None = None
    severity: str | None = None
    pci_id: str | None = None
    recovery_action: str | None = None


#: Classes of :class:`HostEvent`.
HOST_CLASSES = ("hung_task", "nfs", "lustre", "gpfs", "machine_check", "edac")


@dataclass(frozen=True)
class HostEvent:
    """One host event of the kernel log (see the module doc).

    ``cls``: one of :data:`HOST_CLASSES`. ``kind``: ``blocked`` (hung task), ``not_responding``,
    ``recovered`` (``nfs: server X OK``, Lustre ``Connection restored``), ``connection_lost``,
    ``evicted``, ``error`` (another ``LustreError:``), ``lost_membership``, ``disk_failure``,
    ``unmounted``, ``daemon_down``, ``events_logged``, ``corrected``, ``uncorrected``.
    ``severity``: ``fatal`` (uncorrected hardware error), ``error`` (the service is lost or a
    task is stuck), ``warning`` (corrected or worth a look), ``info`` (a recovery).
    ``subject``: what the line names (NFS server, Lustre target and NID, task:pid, memory
    controller and DIMM). ``key``: what a recovery is matched on (NFS server, Lustre import).
    ``via``: for a hung task, the module its call trace waits in: a storage client (``nfs``,
    ``lustre``, ``gpfs``) or the NVIDIA driver (``nvidia``), or None. ``recovered_line``: the line of a later recovery of the same key (the
    state is no longer current), else None. ``count``: for EDAC, the error count the line gives.
    """

    line: int
    cls: str
    kind: str
    severity: str
    subject: str
    message: str
    timestamp_raw: str | None = None
    timestamp_s: float | None = None
    key: str | None = None
    via: str | None = None
    recovered_line: int | None = None
    count: int | None = None

    @property
    def current(self) -> bool:
        """A loss with no later recovery read (a recovery event itself is never current)."""
        return self.recovered_line is None and self.kind != "recovered"


@dataclass(frozen=True)
class KernelLog(ToolRecord):
    """All GPU events of a log, plus driver facts printed around them."""

    events: tuple[KernelEvent, ...]
    driver_version: str | None = None
    probe_failures: int = 0
    warnings: tuple[str, ...] = ()
    driver_messages: tuple[KernelEvent, ...] = ()
    failure: ToolFailure | None = None
    host_events: tuple[HostEvent, ...] = ()
    effective: Mapping[str, object] = effective_field()

    @property
    def xid_codes(self) -> tuple[int, ...]:
        """Distinct Xid codes (including 79 for the no-Xid fallen-off-bus form), sorted."""
        return tuple(sorted({e.code for e in self.events if e.kind != "sxid"}))

    @property
    def fallen_off_bus(self) -> tuple[str, ...]:
        """PCI addresses of GPUs that fell off the bus (either form), in order."""
        return tuple(dict.fromkeys(e.pci_address or "?" for e in self.events if e.kind != "sxid" and e.code == 79))


_TS_RE = re.compile(
    # a bracket holds a timestamp (seconds, ctime, ISO), not a scanner's "[XID found]"
    r"^(?:\[\s*(\d[^\]]*|[A-Z][a-z]{2} [A-Z][a-z]{2} [^\]]+)\]\s?"
    r"|(\d{4}-\d\d-\d\dT[\d:.,]+(?:[+-]\d\d:?\d\d|Z)?)\s+\S+\s+kernel:\s?"
    r"|([A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d)\s+\S+\s+kernel:\s?)"
)
_XID_RE = re.compile(r"NVRM: Xid \((?:PCI:)?([0-9A-Fa-f:.]+)\): (\d+),\s*(.*)$")
_SXID_RE = re.compile(r"SXid \((?:PCI:)?([0-9A-Fa-f:.]+)\): (\d+),\s*(?:(Fatal|Non-fatal),\s*)?(.*)$")
_RECOVERY_RE = re.compile(
    r"recovery action changed from\s+\S+(?:\s*\([^)]*\))?\s+to\s+(0x[0-9A-Fa-f]+|\d+)(?:\s*\(([^)]*)\))?",
    re.IGNORECASE,
)
_PID_RE = re.compile(r"^pid=['\"]?([^,'\"]*)['\"]?,\s*(?:name=['\"]?([^,'\"]*)['\"]?,\s*)?(.*)$")
_GPU_START_RE = re.compile(r"NVRM: (?:The NVIDIA )?GPU (?:at )?(?:PCI:)?([0-9A-Fa-f]{4}:[0-9A-Fa-f:.]+)")
_PCI_ID_RE = re.compile(r"\(PCI ID: ([0-9a-fA-F]{4}:[0-9a-fA-F]{4})\)")
_PROBE_RE = re.compile(r"probe routine failed for (\d+) device")
_GPU_NAMED_RE = re.compile(
    r"NVRM: (?:The NVIDIA )?(?:GPU (?:at )?(?:PCI:)?)?([0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.\d)?)"
    r"|NVRM: (GPU\d+) "
)
_DRIVER_RE = re.compile(r"Kernel Module for \S+\s+([\d.]+)")


def _split_ts(line: str) -> tuple[str | None, str]:
    m = _TS_RE.match(line)
    if not m:
        return None, line
    raw = next(g for g in m.groups() if g is not None).strip()
    return raw, line[m.end() :]


def _seconds(raw: str | None) -> float | None:
    if raw is None:
        return None
    try:
        return float(raw)
    except ValueError:
        return None


def _logical_lines(text: str) -> list[tuple[int, str | None, str]]:
    """(first line number, raw timestamp, message) with untimestamped indented lines joined."""
    out: list[tuple[int, str | None, str]] = []
    for no, line in numbered_lines(text):
        if not line.strip():
            continue
        raw, msg = _split_ts(line)
        if raw is None and line[:1].isspace() and out:
            pno, praw, pmsg = out[-1]
            out[-1] = (pno, praw, pmsg + " " + msg.strip())
            continue
        out.append((no, raw, msg.strip()))
    return out


def _same_gpu(a: str | None, b: str | None) -> bool:
    """``0000:09:00`` and ``0000:09:00.0`` (the Xid form and the bus-id form) name one GPU."""
    if a is None or b is None:
        return False
    return a.rstrip(":.").split(".")[0].lower() == b.rstrip(":.").split(".")[0].lower()


def _xid_event(no: int, raw: str | None, m: re.Match[str]) -> KernelEvent:
    rest = m.group(3).strip()
    pid: int | None = None
    name: str | None = None
    pm = _PID_RE.match(rest)
    if pm:
        pid = int(pm.group(1)) if pm.group(1).isdigit() else None
        name = pm.group(2) if pm.group(2) and pm.group(2) != "<unknown>" else None  # name= optional
        rest = pm.group(3).strip()
    rm = _RECOVERY_RE.search(rest)
    action = ((rm.group(2) or "").strip() or rm.group(1)) if rm else None
    return KernelEvent(
        no, "xid", int(m.group(2)), m.group(1), rest, raw, _seconds(raw), pid, name, recovery_action=action
    )


#: An open ``The NVIDIA GPU ...`` block: first line number, raw timestamp, text so far, address.
_Pending = tuple[int, str | None, str, str | None]


class _Reader:
    """Events and driver facts read so far; the handlers of :data:`_LINES`, which see one
    logical line's message (``raw`` holds its timestamp as printed)."""

    def __init__(self) -> None:
        self.events: list[KernelEvent] = []
        self.driver: str | None = None
        self.probe = 0
        self.raw: str | None = None
        self.pending: _Pending | None = None
        self.messages: list[KernelEvent] = []
        self.stamps: list[str] = []
        self.host = _HostReader()

    def read(self, no: int, raw: str | None, msg: str) -> None:
        """One logical line; an ``NVRM:`` line continuing an open GPU block is joined to it."""
        if raw is not None:
            self.stamps.append(raw)
        self.host.read(no, raw, msg)
        if "NVRM" not in msg and "SXid" not in msg:
            return
        self.driver_message(no, raw, msg)
        p = self.pending
        if p is not None and "Xid" not in msg and msg.startswith("NVRM: ") and not _GPU_START_RE.search(msg):
            self.pending = p = (p[0], p[1], p[2] + " " + msg[6:], p[3])
            no, raw, msg = p[0], p[1], p[2]
        self.raw = raw
        _LINES(self, no, msg)

    def driver_message(self, no: int, raw: str | None, msg: str) -> None:
        """Note a driver message of :data:`DRIVER_MESSAGES` (it may also be an event)."""
        if _ANY_DRIVER_MESSAGE_RE.search(msg) is None:
            return
        for kind, rx in DRIVER_MESSAGES:
            if rx.search(msg):
                pm = _GPU_NAMED_RE.search(msg)
                where = (pm.group(1) or pm.group(2)) if pm else None
                self.messages.append(KernelEvent(no, kind, 0, where, msg, raw, _seconds(raw)))
                return

    def result(self, lines: int) -> KernelLog:
        """The :class:`KernelLog`, with a warning for a GPU block that never ended."""
        warnings: list[str] = []
        if self.pending is not None:
            warnings.append(f"line {self.pending[0]}: GPU message without a recognised ending: {self.pending[2][:80]}")
        return KernelLog(
            events=tuple(self.events),
            driver_version=self.driver,
            probe_failures=self.probe,
            warnings=tuple(warnings),
            driver_messages=tuple(self.messages),
            host_events=tuple(self.host.events),
            effective=effective(
                timestamps=_stamp_format(self.stamps[0]) if self.stamps else None,
                first_timestamp=self.stamps[0] if self.stamps else None,
                last_timestamp=self.stamps[-1] if self.stamps else None,
                lines=lines,
                driver_version=self.driver,
            ),
        )

    def fallen_off_bus(self, no: int, msg: str, _m: re.Match[str]) -> None:
        """The no-Xid form (570+): the address from the message or the open GPU block."""
        addr_m = _GPU_START_RE.search(msg)
        addr = addr_m.group(1) if addr_m else (self.pending[3] if self.pending else None)
        last = self.events[-1] if self.events else None
        if last is not None and last.code == FALLEN_OFF_BUS_XID and _same_gpu(last.pci_address, addr):
            self.pending = None  # the second line of the Xid 79 just read, not a new event
            return
        pid_m = _PCI_ID_RE.search(msg)
        clean = re.sub(r"\s*NVRM:\s*", " ", msg).strip()
        self.events.append(
            KernelEvent(
                no,
                "fallen_off_bus",
                FALLEN_OFF_BUS_XID,
                addr,
                clean,
                self.raw,
                _seconds(self.raw),
                pci_id=pid_m.group(1) if pid_m else None,
            )
        )
        self.pending = None

    def xid(self, no: int, msg: str, m: re.Match[str]) -> None:
        self.pending = None
        self.events.append(_xid_event(no, self.raw, m))

    def sxid(self, no: int, msg: str, m: re.Match[str]) -> None:
        self.events.append(
            KernelEvent(
                no,
                "sxid",
                int(m.group(2)),
                m.group(1),
                m.group(4).strip(),
                self.raw,
                _seconds(self.raw),
                severity=m.group(3).lower() if m.group(3) else None,
            )
        )

    def gpu_block(self, no: int, msg: str, m: re.Match[str]) -> bool:
        """``NVRM: The NVIDIA GPU <addr>``: opens a block (declined while one is open)."""
        if self.pending is not None:
            return False
        self.pending = (no, self.raw, msg, m.group(1))
        return True

    def probe_failed(self, no: int, msg: str, m: re.Match[str]) -> None:
        self.probe += int(m.group(1))
        self.pending = None

    def driver_line(self, no: int, msg: str, m: re.Match[str]) -> None:
        self.driver = m.group(1)


#: Messages of logical lines that name NVRM or SXid (joined to an open GPU block).
_LINES: LineDispatch[_Reader] = LineDispatch(
    [
        (lambda s: "fallen off the bus" in s and "Xid" not in s, _Reader.fallen_off_bus),
        (_XID_RE, _Reader.xid),
        (_SXID_RE, _Reader.sxid),
        (_GPU_START_RE, _Reader.gpu_block),
        (_PROBE_RE, _Reader.probe_failed),
        (_DRIVER_RE, _Reader.driver_line),
    ]
)


_HUNG_RE = re.compile(r"INFO: task (.+?):(\d+) blocked for more than (\d+) seconds")
_NFS_DOWN_RE = re.compile(r"\bnfs: server (\S+) not responding, (still trying|timed out)")
_NFS_OK_RE = re.compile(r"\bnfs: server (\S+) OK\b")
_LUSTRE_LOST_RE = re.compile(r"(\S+): Connection to (?:service )?(\S+) (?:\(at (\S+?)\)|via nid (\S+)) was lost")
_LUSTRE_RESTORED_RE = re.compile(r"(\S+): Connection restored to (?:service )?(\S*)\s*(?:\(at (\S+?)\)|via nid (\S+))?")
_LUSTRE_EVICTED_RE = re.compile(r"(?:(\S+): )?This client was evicted by (\S+?)[;.]")
_LUSTRE_ERROR_RE = re.compile(r"\bLustreError: (.*)$")
_GPFS_LINE_RE = re.compile(r"\bmmfs|\bGPFS\b")
_GPFS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("lost_membership", re.compile(r"Lost membership in cluster (\S+?)\.?(?:\s|$)")),
    ("disk_failure", re.compile(r"Disk failure\b(.*)$")),
    ("daemon_down", re.compile(r"daemon is shutting down abnormally")),
    ("unmounted", re.compile(r"Unmounting file systems?\b(.*)$")),
)
_MCE_LOGGED_RE = re.compile(r"mce: \[Hardware Error\]: Machine check events logged")
_MCE_BANK_RE = re.compile(
    r"CPU:? ?(\d+):? Machine Check(?: Exception| Event)?: (\S+) Bank (\d+): ([0-9a-fA-F]{4,16})\b"
)
_MCE_FATAL_RE = re.compile(
    r"Kernel panic - not syncing: .*[Mm]achine check|Fatal [Mm]achine check|Processor context corrupt"
)
_MEMORY_FAILURE_RE = re.compile(r"Memory failure: (0x[0-9a-fA-F]+): (.*)$")
_GHES_RE = re.compile(r"\[Hardware Error\]: event severity: (corrected|recoverable|fatal)")
_EDAC_RE = re.compile(r"EDAC (?:\S+ )?(MC\d+): (\d+) (CE|UE) (.*?)(?: on (\S+))?(?: \(|$)")
_HOST_HINT_RE = re.compile(
    r"INFO: task|nfs: server|Lustre|mmfs|GPFS|Hardware Error|[Mm]achine [Cc]heck|EDAC|Memory failure"
)
#: Words of a hung task's call trace that name the module it waits in: a storage client, or
#: the NVIDIA driver (``[nvidia_uvm]``, ``uvm_*``, ``nv_*``: the GPU driver is wedged).
_TRACE_CLIENT: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("nvidia", re.compile(r"\[nvidia\w*\]|\bnvidia_\w+\+0x|\buvm_\w+\+0x|\bos_acquire_mutex")),
    ("nfs", re.compile(r"\bnfs\w*|\brpc_wait|\[sunrpc\]|\[nfsv?\d?\]")),
    ("lustre", re.compile(r"\[(?:lustre|ptlrpc|osc|mdc|lov|lmv|obdclass)\]|\bll_\w+|\bptlrpc_\w+|\bcl_\w+")),
    ("gpfs", re.compile(r"\[mmfs\w*\]|\bmmfs\w*|\bgpfs\w*", re.IGNORECASE)),
)
#: Lines of a hung task's report searched for its call trace.
_TRACE_LINES = 60
#: MCi_STATUS bit 61: the error was not corrected (Intel SDM vol. 3B 16.3.2.2, AMD APM vol. 2 9.3).
_MCI_STATUS_UC = 1 << 61


class _HostReader:
    """Host events of a kernel log, line by line (see :class:`HostEvent`)."""

    def __init__(self) -> None:
        self.events: list[HostEvent] = []
        self.hung: int | None = None  # index of the hung task whose trace is being read
        self.hung_left = 0

    def add(
        self,
        no: int,
        raw: str | None,
        cls: str,
        kind: str,
        severity: str,
        subject: str,
        msg: str,
        key: str | None = None,
        count: int | None = None,
    ) -> None:
        self.events.append(HostEvent(no, cls, kind, severity, subject, msg, raw, _seconds(raw), key, count=count))

    def recover(self, no: int, cls: str, key: str) -> None:
        """Mark every current loss of ``cls`` on ``key`` as recovered at line ``no``."""
        for i, e in enumerate(self.events):
            if e.cls == cls and e.key == key and e.current:
                self.events[i] = replace(e, recovered_line=no)

    def trace(self, msg: str) -> None:
        """A line after a hung task's report: the storage client its call trace names."""
        if self.hung is None:
            return
        self.hung_left -= 1
        for client, rx in _TRACE_CLIENT:
            if rx.search(msg):
                self.events[self.hung] = replace(self.events[self.hung], via=client)
                self.hung = None
                return
        if self.hung_left <= 0:
            self.hung = None

    def read(self, no: int, raw: str | None, msg: str) -> None:  # noqa: C901 - one table of wordings
        """One logical line."""
        if _HOST_HINT_RE.search(msg) is None:
            self.trace(msg)
            return
        if m := _HUNG_RE.search(msg):
            self.add(no, raw, "hung_task", "blocked", "error", f"{m.group(1)}:{m.group(2)}", msg.strip())
            self.hung, self.hung_left = len(self.events) - 1, _TRACE_LINES
            return
        self.trace(msg)
        if m := _NFS_DOWN_RE.search(msg):
            self.add(no, raw, "nfs", "not_responding", "error", m.group(1), msg.strip(), key=m.group(1))
        elif m := _NFS_OK_RE.search(msg):
            self.recover(no, "nfs", m.group(1))
            self.add(no, raw, "nfs", "recovered", "info", m.group(1), msg.strip(), key=m.group(1))
        elif m := _LUSTRE_LOST_RE.search(msg):
            nid = m.group(3) or m.group(4)
            self.add(
                no, raw, "lustre", "connection_lost", "error", f"{m.group(2)} (at {nid})", msg.strip(), key=m.group(1)
            )
        elif m := _LUSTRE_EVICTED_RE.search(msg):
            self.add(no, raw, "lustre", "evicted", "error", m.group(2), msg.strip(), key=m.group(1) or m.group(2))
        elif m := _LUSTRE_RESTORED_RE.search(msg):
            self.recover(no, "lustre", m.group(1))
            nid = m.group(3) or m.group(4)
            subject = f"{m.group(2) or m.group(1)}" + (f" (at {nid})" if nid else "")
            self.add(no, raw, "lustre", "recovered", "info", subject, msg.strip(), key=m.group(1))
        elif m := _LUSTRE_ERROR_RE.search(msg):
            self.add(no, raw, "lustre", "error", "warning", m.group(1)[:80], msg.strip())
        elif _GPFS_LINE_RE.search(msg) and (g := next(((k, gm) for k, rx in _GPFS if (gm := rx.search(msg))), None)):
            kind, gm = g
            subject = gm.group(1).strip() if gm.groups() and gm.group(1) else "GPFS"
            self.add(no, raw, "gpfs", kind, "error", subject or "GPFS", msg.strip(), key=subject)
        elif _MCE_LOGGED_RE.search(msg):
            self.add(no, raw, "machine_check", "events_logged", "warning", "CPU", msg.strip())
        elif m := _MCE_BANK_RE.search(msg):
            uc = bool(int(m.group(4), 16) & _MCI_STATUS_UC)
            self.add(
                no,
                raw,
                "machine_check",
                "uncorrected" if uc else "corrected",
                "fatal" if uc else "warning",
                f"CPU {m.group(1)} bank {m.group(3)} status 0x{m.group(4).lower()}",
                msg.strip(),
            )
        elif _MCE_FATAL_RE.search(msg):
            self.add(no, raw, "machine_check", "uncorrected", "fatal", "CPU", msg.strip())
        elif m := _MEMORY_FAILURE_RE.search(msg):
            self.add(no, raw, "machine_check", "uncorrected", "fatal", f"page {m.group(1)}", msg.strip())
        elif m := _GHES_RE.search(msg):
            sev = m.group(1)
            kind = "corrected" if sev == "corrected" else "uncorrected"
            self.add(
                no,
                raw,
                "machine_check",
                kind,
                "warning" if sev == "corrected" else "fatal",
                f"APEI ({sev})",
                msg.strip(),
            )
        elif m := _EDAC_RE.search(msg):
            ue = m.group(3) == "UE"
            where = f"{m.group(1)} {m.group(5)}" if m.group(5) else m.group(1)
            self.add(
                no,
                raw,
                "edac",
                "uncorrected" if ue else "corrected",
                "fatal" if ue else "warning",
                where,
                msg.strip(),
                count=int(m.group(2)),
            )


def _stamp_format(raw: str) -> str:
    """``monotonic`` (seconds since boot), ``ctime`` (``dmesg -T``), ``iso`` or ``journal``."""
    if raw[:1].isdigit() and ("T" in raw or "-" in raw[:5]):
        return "iso"
    if _seconds(raw) is not None:
        return "monotonic"
    return "ctime" if raw[-4:].isdigit() else "journal"


@guarded(TOOL)
def parse(text: str) -> KernelLog:
    """Parse a kernel log into a :class:`KernelLog` (events in log order).

    dmesg's own failure (``dmesg: read kernel buffer failed: ...``) gives a record with
    ``failure`` set and no events.

    Raises:
        ParseError: the text is empty or has no kernel-log line (see the module doc).
    """
    if not text.strip():
        raise ParseError(TOOL, "empty kernel log", line=1, expected="kernel log lines")
    head = text[:2000]
    failure = FAILURES.scan(numbered_lines(head)) if "dmesg:" in head or "journal" in head else None
    if failure is not None:
        return KernelLog(events=(), failure=failure)
    if not any(_KERNEL_LINE_RE.search(line) for line in text.splitlines()):
        raise not_tool_output(TOOL, "kernel log lines (dmesg, journalctl -k)", text)
    reader = _Reader()
    logical = _logical_lines(text)
    for no, raw, msg in logical:
        reader.read(no, raw, msg)
    return reader.result(len(logical))


def detect(text: str) -> bool:
    """True when ``text`` looks like a kernel log with NVIDIA driver lines or host events."""
    head = text[:50000]
    if "NVRM:" in head or "SXid (" in head:
        return True
    if any(FAILURES.match(ln) for ln in head.splitlines()[:10]):
        return True
    # a log of host events only: a kernel-log line (timestamp or ``kernel:``) that is one
    return any(_KERNEL_LINE_RE.search(ln) and _HOST_HINT_RE.search(ln) and _host_line(ln) for ln in head.splitlines())


def _host_line(line: str) -> bool:
    """True when ``line`` is a host event of :class:`HostEvent` (a hung task, a storage client's
    loss or recovery, a machine check, EDAC)."""
    reader = _HostReader()
    reader.read(0, None, _split_ts(line)[1])
    return bool(reader.events)
