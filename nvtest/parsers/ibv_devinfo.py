"""Parser for ``ibv_devinfo`` (libibverbs / rdma-core), plain and ``-v`` output.

Reads ``hca_id: mlx5_0`` blocks (transport, fw_ver, node_guid, sys_image_guid, vendor_id,
vendor_part_id, hw_ver, board_id, phys_port_cnt) and their ``port: N`` sections (state
``PORT_ACTIVE (4)``, phys_state, max_mtu/active_mtu ``4096 (5)``, sm_lid, port_lid, port_lmc,
link_layer; active_speed/active_width with ``-v``). States are translated to ibstat's spelling
so both tools give the same :class:`~nvtest.parsers.ibstat.IbReport`.

Units: MTU in bytes; ``rate_gbps`` is computed from active_width x active_speed when ``-v``
printed them, else None.

Failures (:data:`FAILURES`): ``No IB devices found`` (``no_device``; libibverbs' ``no userspace
device-specific driver found`` warnings before it go to ``detail``), ``Failed to get IB devices
list`` (``could_not_start``), ``Failed to open device`` (``init_failure``: a device listed but not
opened, e.g. an SR-IOV VF not assigned to this container; the HCAs that did open are read).
"""

from __future__ import annotations

import re

from nvtest.parsers._common import (
    FailureKind,
    FailureTable,
    guarded,
    numbered_lines,
    split_kv,
    to_float,
    to_int,
)
from nvtest.parsers.ibstat import CaBuilder, IbReport

TOOL = "ibv_devinfo"
DESCRIPTION = "ibv_devinfo: per HCA and port state, MTU, LIDs, link layer, firmware and part id"

__all__ = ["FAILURES", "detect", "parse"]

#: ibv_devinfo's (libibverbs, rdma-core 17-50) failure wordings.
FAILURES = FailureTable(
    [
        (
            re.compile(r"^No IB devices found"),
            FailureKind.NO_DEVICE,
            "ibv_devinfo: no verbs device",
        ),
        (
            re.compile(r"^Failed to get IB devices list(?::\s*(?P<code>.+))?$"),
            FailureKind.COULD_NOT_START,
            "ibv_devinfo: libibverbs could not list devices",
        ),
        (
            re.compile(r"^Failed to open device"),
            FailureKind.INIT_FAILURE,
            "ibv_devinfo: a listed device not opened",
        ),
    ],
    binaries=r"ibv_devinfo",
)
_DRIVER_WARNING_RE = re.compile(r"^libibverbs: Warning: ")

_PORT_KEYS = {
    "state": "state",
    "phys_state": "physical_state",
    "max_mtu": "max_mtu",
    "active_mtu": "active_mtu",
    "sm_lid": "sm_lid",
    "port_lid": "base_lid",
    "port_lmc": "lmc",
    "link_layer": "link_layer",
}
_HCA_KEYS = {
    "transport": "transport",
    "fw_ver": "firmware",
    "node_guid": "node_guid",
    "sys_image_guid": "system_image_guid",
    "hw_ver": "hardware_version",
    "board_id": "board_id",
}


def _rate(f: dict[str, str]) -> str | None:
    """``active_width: 4X (2)`` x ``active_speed: 25.0 Gbps (32)`` -> ``"100.0"``."""
    width = re.match(r"(\d+)X", f.get("active_width", ""))
    speed = to_float(f.get("active_speed", ""))
    if width and speed is not None:
        return str(int(width.group(1)) * speed)
    return None


def _add_rate(fields: dict[str, str]) -> None:
    rate = _rate(fields)
    if rate is not None:
        fields["rate"] = rate


@guarded(TOOL)
def parse(text: str) -> IbReport:
    """Parse ``ibv_devinfo`` output into an :class:`~nvtest.parsers.ibstat.IbReport`.

    ``No IB devices found`` and the other failures of :data:`FAILURES` give a report with
    ``failure`` set.

    Raises:
        ParseError: not ibv_devinfo's output (no ``hca_id:`` line and no failure line), or a port
            section outside an HCA.
    """
    b = CaBuilder(_add_rate)
    warned: list[str] = []
    opened_failures = 0
    for no, line in numbered_lines(text):
        s = line.strip()
        if _DRIVER_WARNING_RE.match(s):
            warned.append(s)
            continue
        f = FAILURES.failure(no, s, detail=warned[:2])
        if f is not None:
            opened_failures += f.kind is FailureKind.INIT_FAILURE
            if b.failure is None:
                b.failure = f
            continue
        kv = split_kv(s)
        if kv is None:
            continue
        key, value = kv
        if key == "hca_id":
            b.start_ca(value)
        elif key == "port":
            b.start_port(TOOL, no, to_int(value))
        elif b.ca is None:
            continue
        elif b.in_port:
            b.port_f[_PORT_KEYS.get(key, key)] = value
        elif key in _HCA_KEYS:
            b.ca[_HCA_KEYS[key]] = value
        elif key in ("vendor_id", "vendor_part_id"):
            b.ca[key] = to_int(value)
        elif key == "phys_port_cnt":
            b.ca["num_ports"] = to_int(value)
    if opened_failures > 1:
        b.warnings.append(f"{opened_failures} devices listed but not opened ('Failed to open device')")
    return b.report(TOOL, text)


def detect(text: str) -> bool:
    """True when ``text`` looks like ibv_devinfo output."""
    head = text[:20000]
    if "hca_id:" in head and ("fw_ver" in head or "port:" in head):
        return True
    return bool(re.search(r"^(?:No IB devices found|Failed to get IB devices list)", head, re.M))
