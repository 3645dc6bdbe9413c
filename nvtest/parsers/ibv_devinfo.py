"""Parser for ``ibv_devinfo`` (libibverbs / rdma-core), plain and ``-v`` output.

Reads ``hca_id: mlx5_0`` blocks (transport, fw_ver, node_guid, sys_image_guid, vendor_id,
vendor_part_id, hw_ver, board_id, phys_port_cnt) and their ``port: N`` sections (state
``PORT_ACTIVE (4)``, phys_state, max_mtu/active_mtu ``4096 (5)``, sm_lid, port_lid, port_lmc,
link_layer; active_speed/active_width with ``-v``). States are translated to ibstat's spelling
so both tools give the same :class:`~nvtest.parsers.ibstat.IbReport`.

Units: MTU in bytes; ``rate_gbps`` is computed from active_width x active_speed when ``-v``
printed them, else None.
"""

from __future__ import annotations

import re

from nvtest.parsers._common import ParseError, guarded, numbered_lines, split_kv, to_float, to_int
from nvtest.parsers.ibstat import CaBuilder, IbReport

TOOL = "ibv_devinfo"
DESCRIPTION = "ibv_devinfo: per HCA and port state, MTU, LIDs, link layer, firmware and part id"

__all__ = ["detect", "parse"]

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

    Raises:
        ParseError: no ``hca_id:`` line, or a port section outside an HCA; also for
            ``No IB devices found``.
    """
    if "No IB devices found" in text[:2000]:
        raise ParseError(TOOL, "No IB devices found", line=1, expected="hca_id blocks")
    b = CaBuilder(_add_rate)
    for no, line in numbered_lines(text):
        kv = split_kv(line.strip())
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
    return b.report(TOOL)


def detect(text: str) -> bool:
    """True when ``text`` looks like ibv_devinfo output."""
    head = text[:20000]
    return "hca_id:" in head and ("fw_ver" in head or "port:" in head)
