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
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from nvtest.parsers._common import LineDispatch, ParseError, guarded, numbered_lines

TOOL = "dmesg"
DESCRIPTION = "kernel log (dmesg, dmesg -T, journalctl -k): Xid, SXid and fallen-off-the-bus events"

__all__ = ["KernelEvent", "KernelLog", "detect", "parse"]

FALLEN_OFF_BUS_XID = 79


@dataclass(frozen=True)
class KernelEvent:
    """One GPU event. ``kind`` is ``xid``, ``sxid`` or ``fallen_off_bus`` (code 79, no Xid line)."""

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


@dataclass(frozen=True)
class KernelLog:
    """All GPU events of a log, plus driver facts printed around them."""

    events: tuple[KernelEvent, ...]
    driver_version: str | None = None
    probe_failures: int = 0
    warnings: tuple[str, ...] = ()

    @property
    def xid_codes(self) -> tuple[int, ...]:
        """Distinct Xid codes (including 79 for the no-Xid fallen-off-bus form), sorted."""
        return tuple(sorted({e.code for e in self.events if e.kind != "sxid"}))

    @property
    def fallen_off_bus(self) -> tuple[str, ...]:
        """PCI addresses of GPUs that fell off the bus (either form), in order."""
        return tuple(
            dict.fromkeys(
                e.pci_address or "?" for e in self.events if e.kind != "sxid" and e.code == 79
            )
        )


_TS_RE = re.compile(
    r"^(?:\[\s*([^\]]+)\]\s?"
    r"|(\d{4}-\d\d-\d\dT[\d:.,]+(?:[+-]\d\d:?\d\d|Z)?)\s+\S+\s+kernel:\s?"
    r"|([A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d)\s+\S+\s+kernel:\s?)"
)
_XID_RE = re.compile(r"NVRM: Xid \((?:PCI:)?([0-9A-Fa-f:.]+)\): (\d+),\s*(.*)$")
_SXID_RE = re.compile(
    r"SXid \((?:PCI:)?([0-9A-Fa-f:.]+)\): (\d+),\s*(?:(Fatal|Non-fatal),\s*)?(.*)$"
)
_PID_RE = re.compile(r"^pid=['\"]?([^,'\"]*)['\"]?,\s*name=['\"]?([^,'\"]*)['\"]?,\s*(.*)$")
_GPU_START_RE = re.compile(
    r"NVRM: (?:The NVIDIA )?GPU (?:at )?(?:PCI:)?([0-9A-Fa-f]{4}:[0-9A-Fa-f:.]+)"
)
_PCI_ID_RE = re.compile(r"\(PCI ID: ([0-9a-fA-F]{4}:[0-9a-fA-F]{4})\)")
_PROBE_RE = re.compile(r"probe routine failed for (\d+) device")
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


def _xid_event(no: int, raw: str | None, m: re.Match[str]) -> KernelEvent:
    rest = m.group(3).strip()
    pid: int | None = None
    name: str | None = None
    pm = _PID_RE.match(rest)
    if pm:
        pid = int(pm.group(1)) if pm.group(1).isdigit() else None
        name = pm.group(2) if pm.group(2) and pm.group(2) != "<unknown>" else None
        rest = pm.group(3).strip()
    return KernelEvent(no, "xid", int(m.group(2)), m.group(1), rest, raw, _seconds(raw), pid, name)


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

    def read(self, no: int, raw: str | None, msg: str) -> None:
        """One logical line; an ``NVRM:`` line continuing an open GPU block is joined to it."""
        if "NVRM" not in msg and "SXid" not in msg:
            return
        p = self.pending
        if (
            p is not None
            and "Xid" not in msg
            and msg.startswith("NVRM: ")
            and not _GPU_START_RE.search(msg)
        ):
            self.pending = p = (p[0], p[1], p[2] + " " + msg[6:], p[3])
            no, raw, msg = p[0], p[1], p[2]
        self.raw = raw
        _LINES(self, no, msg)

    def result(self) -> KernelLog:
        """The :class:`KernelLog`, with a warning for a GPU block that never ended."""
        warnings: list[str] = []
        if self.pending is not None:
            warnings.append(
                f"line {self.pending[0]}: GPU message without a recognised ending: {self.pending[2][:80]}"
            )
        return KernelLog(
            events=tuple(self.events),
            driver_version=self.driver,
            probe_failures=self.probe,
            warnings=tuple(warnings),
        )

    def fallen_off_bus(self, no: int, msg: str, _m: re.Match[str]) -> None:
        """The no-Xid form (570+): the address from the message or the open GPU block."""
        addr_m = _GPU_START_RE.search(msg)
        addr = addr_m.group(1) if addr_m else (self.pending[3] if self.pending else None)
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


@guarded(TOOL)
def parse(text: str) -> KernelLog:
    """Parse a kernel log into a :class:`KernelLog` (events in log order).

    Raises:
        ParseError: the text is empty, or is dmesg's own permission error rather than a log.
    """
    if not text.strip():
        raise ParseError(TOOL, "empty kernel log", line=1, expected="kernel log lines")
    if "read kernel buffer failed" in text[:500]:
        raise ParseError(
            TOOL, "dmesg could not read the kernel buffer", line=1, expected="kernel log lines"
        )
    reader = _Reader()
    for no, raw, msg in _logical_lines(text):
        reader.read(no, raw, msg)
    return reader.result()


def detect(text: str) -> bool:
    """True when ``text`` looks like a kernel log with NVIDIA driver lines."""
    head = text[:50000]
    return "NVRM:" in head or "SXid (" in head
