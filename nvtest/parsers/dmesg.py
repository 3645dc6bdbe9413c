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

from nvtest.parsers._common import ParseError, guarded, numbered_lines

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
    events: list[KernelEvent] = []
    driver: str | None = None
    probe = 0
    warnings: list[str] = []
    pending: tuple[int, str | None, str, str | None] | None = None  # a "The NVIDIA GPU" block
    for no, raw, msg in _logical_lines(text):
        if "NVRM" not in msg and "SXid" not in msg:
            continue
        if (
            pending is not None
            and "Xid" not in msg
            and msg.startswith("NVRM: ")
            and not _GPU_START_RE.search(msg)
        ):
            pno, praw, pmsg, paddr = pending
            pending = (pno, praw, pmsg + " " + msg[6:], paddr)
            msg = pending[2]
            no, raw = pno, praw
        if "fallen off the bus" in msg and "Xid" not in msg:
            addr_m = _GPU_START_RE.search(msg)
            addr = addr_m.group(1) if addr_m else (pending[3] if pending else None)
            pid_m = _PCI_ID_RE.search(msg)
            clean = re.sub(r"\s*NVRM:\s*", " ", msg).strip()
            events.append(
                KernelEvent(
                    no,
                    "fallen_off_bus",
                    FALLEN_OFF_BUS_XID,
                    addr,
                    clean,
                    raw,
                    _seconds(raw),
                    pci_id=pid_m.group(1) if pid_m else None,
                )
            )
            pending = None
            continue
        m = _XID_RE.search(msg)
        if m:
            pending = None
            events.append(_xid_event(no, raw, m))
            continue
        m = _SXID_RE.search(msg)
        if m:
            events.append(
                KernelEvent(
                    no,
                    "sxid",
                    int(m.group(2)),
                    m.group(1),
                    m.group(4).strip(),
                    raw,
                    _seconds(raw),
                    severity=m.group(3).lower() if m.group(3) else None,
                )
            )
            continue
        gm = _GPU_START_RE.search(msg)
        if gm and pending is None:
            pending = (no, raw, msg, gm.group(1))
            continue
        m2 = _PROBE_RE.search(msg)
        if m2:
            probe += int(m2.group(1))
            pending = None
            continue
        m3 = _DRIVER_RE.search(msg)
        if m3:
            driver = m3.group(1)
    if pending is not None:
        warnings.append(
            f"line {pending[0]}: GPU message without a recognised ending: {pending[2][:80]}"
        )
    return KernelLog(
        events=tuple(events), driver_version=driver, probe_failures=probe, warnings=tuple(warnings)
    )


def detect(text: str) -> bool:
    """True when ``text`` looks like a kernel log with NVIDIA driver lines."""
    head = text[:50000]
    return "NVRM:" in head or "SXid (" in head
