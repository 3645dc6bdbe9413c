"""Parser for ``ibstatus`` (infiniband-diags' shell script, rdma-core 17 to 5x; OFED's copy).

``ibstatus [devname[:port]]`` prints, for every port of every device under
``/sys/class/infiniband``, one block read straight from sysfs::

    Infiniband device 'mlx5_0' port 1 status:
    <TAB>default gid:<TAB> fe80:0000:0000:0000:0015:5dff:fd34:11eb
    <TAB>base lid:<TAB> 0x33bf
    <TAB>sm lid:<TAB><TAB> 0x1
    <TAB>state:<TAB><TAB> 4: ACTIVE
    <TAB>phys state:<TAB> 5: LinkUp
    <TAB>rate:<TAB><TAB> 200 Gb/sec (4X HDR)
    <TAB>link_layer:<TAB> InfiniBand

(pasted copies often turn the tabs into spaces; both are read). A value the script could not
read is printed as ``unknown``: it becomes None, with a warning. Every device becomes an
:class:`~nvtest.parsers.ibstat.IbCa` of the same :class:`~nvtest.parsers.ibstat.IbReport`
that ``ibstat`` and ``ibv_devinfo`` give, so checks need not care which tool ran; its ports
are :class:`IbstatusPort` (an :class:`~nvtest.parsers.ibstat.IbPort` with the default GID and
the rate as printed). States are translated to ibstat's spelling (``4: ACTIVE`` -> ``Active``,
``5: LinkUp`` -> ``LinkUp``).

Units: ``rate_gbps`` is the sysfs rate in Gb/s (``200 Gb/sec (4X HDR)`` -> 200.0); LIDs are
integers (sysfs prints them in hex). The CA-level fields ibstat prints (CA type, firmware,
GUIDs) are not in ibstatus' output and stay None.

Failures (:data:`FAILURES`, the script's ``fatal``, all ``no_device``): ``Fatal error:  device
'*': sys files not found (/sys/class/infiniband/*/ports)`` (the directory is there but empty, e.g.
the HCA's driver failed to probe: the usual wording of a node without RDMA devices), ``Fatal
error:  device 'X': sys files not found`` (a device named on the command line is not there) and
``Fatal error:  No devices`` (no ``/sys/class/infiniband`` at all). ``effective``: the devices
listed and the number of ports.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from nvtest.parsers._common import FailureKind, FailureTable, guarded, numbered_lines, split_kv
from nvtest.parsers.ibstat import CaBuilder, IbPort, IbReport, port_from_fields

TOOL = "ibstatus"
DESCRIPTION = "ibstatus: per device and port state, physical state, rate, link layer, LIDs, default GID"

__all__ = ["FAILURES", "IbstatusPort", "detect", "parse"]

#: The ``fatal`` wordings of infiniband-diags' ``scripts/ibstatus`` (rdma-core 17 to 5x).
FAILURES = FailureTable(
    [
        (
            re.compile(r"^Fatal error:\s+device '\*': (?P<code>sys files not found)"),
            FailureKind.NO_DEVICE,
            "ibstatus: /sys/class/infiniband is empty (its glob did not expand): no RDMA device",
        ),
        (
            re.compile(r"^Fatal error:\s+device '(?P<device>[^']+)': (?P<code>sys files not found)"),
            FailureKind.NO_DEVICE,
            "ibstatus: a device named on the command line has no /sys/class/infiniband entry",
        ),
        (
            re.compile(r"^Fatal error:\s+(?P<code>No devices)"),
            FailureKind.NO_DEVICE,
            "ibstatus: no /sys/class/infiniband (no RDMA driver loaded)",
        ),
    ],
    binaries=r"ibstatus",
)


@dataclass(frozen=True)
class IbstatusPort(IbPort):
    """An :class:`~nvtest.parsers.ibstat.IbPort` with what only ibstatus prints.

    ``default_gid`` is GID index 0 as printed (``fe80:...``); ``rate_text`` the sysfs rate line
    (``200 Gb/sec (4X HDR)``), which names the width and the speed generation.
    """

    default_gid: str | None = None
    rate_text: str | None = None


_HEAD_RE = re.compile(r"^Infiniband device '([^']+)' port (\d+) status:")
#: ibstatus' labels -> the keys of :func:`~nvtest.parsers.ibstat.port_from_fields`.
_KEYS = {
    "default gid": "default_gid",
    "base lid": "base_lid",
    "sm lid": "sm_lid",
    "state": "state",
    "phys state": "physical_state",
    "rate": "rate",
    "link_layer": "link_layer",
}


def _port(port: int, f: dict[str, str]) -> IbstatusPort:
    """The :class:`IbstatusPort` of one block's fields (keys of :data:`_KEYS`)."""
    base = port_from_fields(port, f)
    fields = {k.name: getattr(base, k.name) for k in dataclasses.fields(IbPort)}
    return IbstatusPort(**fields, default_gid=f.get("default_gid"), rate_text=f.get("rate"))


@guarded(TOOL)
def parse(text: str) -> IbReport:
    """Parse ``ibstatus`` output into an :class:`~nvtest.parsers.ibstat.IbReport`.

    Raises:
        ParseError: not ibstatus' output (no ``Infiniband device '...' port N status:`` line and
            no failure of :data:`FAILURES`).
    """
    b = CaBuilder(make_port=_port)
    device: str | None = None
    for no, line in numbered_lines(text):
        s = line.strip()
        if b.note_failure(FAILURES.failure(no, s)):
            continue
        m = _HEAD_RE.match(s)
        if m:
            if m.group(1) != device:
                device = m.group(1)
                b.start_ca(device)
            b.start_port(TOOL, no, int(m.group(2)))
            continue
        kv = split_kv(s)
        if kv is None or not b.in_port or kv[0] not in _KEYS:
            continue
        key, value = _KEYS[kv[0]], kv[1]
        if value in ("", "unknown"):
            b.warnings.append(f"line {no}: {kv[0]} {value or 'empty'} (sysfs file not readable)")
            continue
        b.port_f[key] = value
    return b.report(TOOL, text)


def detect(text: str) -> bool:
    """True when ``text`` looks like ibstatus output."""
    head = text[:20000]
    return bool(
        re.search(r"^\s*Infiniband device '[^']+' port \d+ status:", head, re.M)
        or re.search(r"^Fatal error:\s+(?:No devices|device '[^']+': sys files not found)", head, re.M)
    )
