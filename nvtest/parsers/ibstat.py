"""Parser for ``ibstat`` (infiniband-diags, rdma-core 2x-5x), and the IB records shared with ibv_devinfo.

Reads ``CA 'mlx5_0'`` blocks (CA type, number of ports, firmware, hardware version, GUIDs) and
their ``Port N:`` sections (State, Physical state, Rate, Base lid, LMC, SM lid, Capability mask,
Port GUID, Link layer), indented with tabs or spaces. Output that stops part-way keeps what was
read and notes the gap in ``warnings``.

Units: ``rate_gbps`` is ibstat's ``Rate`` in Gb/s (10 is printed on a port with no link and is
not a measurement). LIDs are integers; 65535 (0xffff) and 0 mean "not assigned".

Failures (:data:`FAILURES`): ``ibpanic: [pid] main: stat of IB device 'mlx5_8' failed: ...``
(``init_failure``; ``crash_after_partial_output`` after CAs were printed, since ibstat exits
there and never lists the CAs after it), ``ibwarn: ... umad_init: can't read ABI version ... is
ib_umad module loaded?`` (``could_not_start``). ``effective``: the CAs listed and their ports.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from nvtest.parsers._common import (
    FailureKind,
    FailureTable,
    ToolFailure,
    ToolRecord,
    effective,
    effective_field,
    guarded,
    not_tool_output,
    numbered_lines,
    split_kv,
    to_float,
    to_int,
)

TOOL = "ibstat"
DESCRIPTION = "ibstat: per CA and port state, physical state, rate, link layer, LIDs, firmware"

__all__ = [
    "FAILURES",
    "IbCa",
    "IbPort",
    "IbReport",
    "detect",
    "normalise_phys_state",
    "normalise_state",
    "parse",
]

UNASSIGNED_LIDS = frozenset({0, 0xFFFF})

#: ibstat's failure wordings (infiniband-diags 2.x, rdma-core 17-50).
FAILURES = FailureTable(
    [
        (
            re.compile(r"ibpanic: \[\d+\] \w+: stat of IB device '(?P<device>[^']+)' failed: (?P<code>.+)$"),
            FailureKind.INIT_FAILURE,
            "ibstat: umad_get_ca failed (rdma-core <= 52 exits at the first such CA)",
        ),
        (
            re.compile(r"ibwarn: \[\d+\] umad_init: (?P<code>.+)$"),
            FailureKind.COULD_NOT_START,
            "libibumad without the ib_umad module",
        ),
        (
            re.compile(r"ibpanic: \[\d+\] \w+: (?P<code>.+)$"),
            FailureKind.INIT_FAILURE,
            "ibstat: other panics",
        ),
    ],
    binaries=r"ibstat",
)

_STATE_NAMES = {
    "active": "Active",
    "port_active": "Active",
    "down": "Down",
    "port_down": "Down",
    "init": "Initializing",
    "initializing": "Initializing",
    "port_init": "Initializing",
    "armed": "Armed",
    "port_armed": "Armed",
    "active_defer": "ActiveDefer",
    "port_active_defer": "ActiveDefer",
}
_PHYS_NAMES = {
    "linkup": "LinkUp",
    "link_up": "LinkUp",
    "polling": "Polling",
    "disabled": "Disabled",
    "sleep": "Sleep",
    "portconfigurationtraining": "PortConfigurationTraining",
    "port_configuration_training": "PortConfigurationTraining",
    "linkerrorrecovery": "LinkErrorRecovery",
    "link_error_recovery": "LinkErrorRecovery",
    "phytest": "PhyTest",
    "phy_test": "PhyTest",
}


def _norm(value: str, table: dict[str, str]) -> str:
    """``"PORT_DOWN (1)"``/``"Down"``/``"4: ACTIVE"`` -> the ibstat spelling (``"Down"``)."""
    v = re.sub(r"\s*\(\d+\)\s*$", "", value.strip())
    v = re.sub(r"^\d+:\s*", "", v)
    return table.get(v.lower(), v)


def normalise_state(value: str) -> str:
    """Logical port state in ibstat spelling: Active, Down, Initializing, Armed, ActiveDefer."""
    return _norm(value, _STATE_NAMES)


def normalise_phys_state(value: str) -> str:
    """Physical port state in ibstat spelling: LinkUp, Polling, Disabled, Sleep, ..."""
    return _norm(value, _PHYS_NAMES)


@dataclass(frozen=True)
class IbPort:
    """One HCA port. States use ibstat's spelling whatever tool printed them."""

    port: int
    state: str | None = None
    physical_state: str | None = None
    rate_gbps: float | None = None
    link_layer: str | None = None
    base_lid: int | None = None
    sm_lid: int | None = None
    lmc: int | None = None
    port_guid: str | None = None
    capability_mask: str | None = None
    active_mtu: int | None = None
    max_mtu: int | None = None

    @property
    def active(self) -> bool:
        """True when the logical state is Active and the physical link is up."""
        return self.state == "Active" and self.physical_state in (None, "LinkUp")

    @property
    def lid_assigned(self) -> bool | None:
        """For InfiniBand ports: False when the base LID is 0 or 65535; None when not applicable."""
        if self.link_layer != "InfiniBand" or self.base_lid is None:
            return None
        return self.base_lid not in UNASSIGNED_LIDS

    @property
    def problem(self) -> str | None:
        """A one-line diagnosis for a port that is not usable, else None."""
        if self.active:
            if self.lid_assigned is False:
                return "Active but no LID assigned (subnet manager?)"
            return None
        if self.physical_state == "Polling":
            return "Down/Polling: no link partner (cable, optic or switch port disabled)"
        if self.physical_state == "Disabled":
            return "Disabled: port disabled on the HCA"
        if self.physical_state == "LinkUp":
            return f"{self.state}/LinkUp: link trained, not activated (check subnet manager / pkey / VF GUID)"
        return f"state {self.state}, physical state {self.physical_state}"


@dataclass(frozen=True)
class IbCa:
    """One channel adapter (HCA) and its ports. ibv_devinfo fills the ``vendor_*``/``board_id`` fields."""

    name: str
    ports: tuple[IbPort, ...]
    ca_type: str | None = None
    num_ports: int | None = None
    firmware: str | None = None
    hardware_version: str | None = None
    node_guid: str | None = None
    system_image_guid: str | None = None
    transport: str | None = None
    vendor_id: int | None = None
    vendor_part_id: int | None = None
    board_id: str | None = None


@dataclass(frozen=True)
class IbReport(ToolRecord):
    """All CAs of one ibstat/ibv_devinfo output."""

    cas: tuple[IbCa, ...]
    warnings: tuple[str, ...] = ()
    failure: ToolFailure | None = None
    effective: Mapping[str, object] = effective_field()

    @property
    def ports(self) -> tuple[tuple[str, IbPort], ...]:
        """Every (CA name, port) pair."""
        return tuple((ca.name, p) for ca in self.cas for p in ca.ports)

    @property
    def active_ports(self) -> int:
        """Number of ports that are Active with the link up."""
        return sum(1 for _, p in self.ports if p.active)


_CA_RE = re.compile(r"^CA '([^']+)'")
_PORT_RE = re.compile(r"^Port (\d+):")
_CA_KEYS = {
    "CA type": "ca_type",
    "Number of ports": "num_ports",
    "Firmware version": "firmware",
    "Hardware version": "hardware_version",
    "Node GUID": "node_guid",
    "System image GUID": "system_image_guid",
}


def port_from_fields(port: int, f: dict[str, str]) -> IbPort:
    """Build an :class:`IbPort` from normalised keys (state, physical_state, rate, link_layer, ...)."""
    rate = to_float(f["rate"]) if "rate" in f else None
    return IbPort(
        port=port,
        state=normalise_state(f["state"]) if "state" in f else None,
        physical_state=normalise_phys_state(f["physical_state"]) if "physical_state" in f else None,
        rate_gbps=rate,
        link_layer=f.get("link_layer"),
        base_lid=to_int(f["base_lid"]) if "base_lid" in f else None,
        sm_lid=to_int(f["sm_lid"]) if "sm_lid" in f else None,
        lmc=to_int(f["lmc"]) if "lmc" in f else None,
        port_guid=f.get("port_guid"),
        capability_mask=f.get("capability_mask"),
        active_mtu=to_int(f["active_mtu"].split()[0]) if f.get("active_mtu") else None,
        max_mtu=to_int(f["max_mtu"].split()[0]) if f.get("max_mtu") else None,
    )


class CaBuilder:
    """Collects CAs and ports line by line; :meth:`report` closes them into an :class:`IbReport`.

    ``port_hook`` may add derived keys to a port's fields before it is built (ibv_devinfo's rate);
    ``make_port`` builds the port from its number and fields (:func:`port_from_fields`, or a
    tool's own :class:`IbPort` subclass).
    """

    def __init__(
        self,
        port_hook: Callable[[dict[str, str]], None] | None = None,
        make_port: Callable[[int, dict[str, str]], IbPort] | None = None,
    ) -> None:
        self.cas: list[IbCa] = []
        self.warnings: list[str] = []
        self.ca: dict[str, object] | None = None
        self.ports: list[IbPort] = []
        self.port_no: int | None = None
        self.port_f: dict[str, str] = {}
        self.in_port = False
        self._hook = port_hook
        self._make_port = make_port or port_from_fields
        self.failure: ToolFailure | None = None

    def note_failure(self, failure: ToolFailure | None) -> bool:
        """Keep the first failure; a failure after CAs were read is a crash after partial
        output (the tool stopped listing). True when ``failure`` is one."""
        if failure is None:
            return False
        if self.failure is None:
            if (self.cas or self.ca is not None) and failure.kind is FailureKind.INIT_FAILURE:
                failure = ToolFailure(
                    FailureKind.CRASH_AFTER_PARTIAL_OUTPUT,
                    failure.message,
                    failure.line,
                    failure.code,
                    failure.device,
                    failure.detail,
                )
            self.failure = failure
        return True

    def close_port(self) -> None:
        """Build the open port section, if any."""
        if self.in_port and self.port_no is not None:
            if self._hook:
                self._hook(self.port_f)
            self.ports.append(self._make_port(self.port_no, self.port_f))
        self.port_no, self.port_f, self.in_port = None, {}, False

    def start_ca(self, name: str) -> None:
        """Close the open CA and start a new one."""
        self.close_ca()
        self.ca = {"name": name}

    def start_port(self, tool: str, no: int, port: int | None) -> None:
        """Start a port section (``port`` None when unreadable: its keys are then dropped)."""
        self.close_port()
        if self.ca is None:
            # a paste that starts inside a CA block: the port belongs to no CA it shows
            self.warnings.append(f"line {no}: port section before any CA (output cut at the start): skipped")
            port = None
        self.port_no, self.in_port = port, True
        if port is None and self.ca is not None:
            self.warnings.append(f"line {no}: unreadable port number")

    def close_ca(self) -> None:
        """Build the open CA, if any."""
        self.close_port()
        if self.ca is not None:
            self.cas.append(IbCa(ports=tuple(self.ports), **self.ca))  # type: ignore[arg-type]
        self.ca, self.ports = None, []

    def report(self, tool: str, text: str) -> IbReport:
        """Close everything and check port counts; ParseError when no CA and no failure was
        read."""
        self.close_ca()
        if not self.cas and self.failure is None:
            raise not_tool_output(tool, "a CA / hca_id block", text)
        for ca in self.cas:
            if ca.num_ports is not None and len(ca.ports) < ca.num_ports:
                self.warnings.append(f"{ca.name}: {ca.num_ports} ports announced, {len(ca.ports)} read (output cut?)")
            for p in ca.ports:
                if p.state is None:
                    self.warnings.append(f"{ca.name} port {p.port}: no state line (output cut?)")
        return IbReport(
            cas=tuple(self.cas),
            warnings=tuple(self.warnings),
            failure=self.failure,
            effective=effective(cas=tuple(ca.name for ca in self.cas), ports=sum(len(ca.ports) for ca in self.cas)),
        )


@guarded(TOOL)
def parse(text: str) -> IbReport:
    """Parse ``ibstat`` output into an :class:`IbReport`.

    Raises:
        ParseError: not ibstat's output (no ``CA '...'`` line and no failure of :data:`FAILURES`),
            or a port section outside a CA.
    """
    b = CaBuilder()
    for no, line in numbered_lines(text):
        s = line.strip()
        if b.note_failure(FAILURES.failure(no, s)):
            continue
        m = _CA_RE.match(s)
        if m:
            b.start_ca(m.group(1))
            continue
        m = _PORT_RE.match(s)
        if m:
            b.start_port(TOOL, no, int(m.group(1)))
            continue
        kv = split_kv(s)
        if kv is None or b.ca is None:
            continue
        key, value = kv
        if b.in_port:
            b.port_f[key.lower().replace(" ", "_")] = value
        elif key in _CA_KEYS:
            name = _CA_KEYS[key]
            b.ca[name] = to_int(value) if name == "num_ports" else value
    return b.report(TOOL, text)


def detect(text: str) -> bool:
    """True when ``text`` looks like ibstat output."""
    head = text[:20000]
    if re.search(r"^\s*CA '[^']+'", head, re.M) and "CA type" in head:
        return True
    return bool(re.search(r"^ib(?:panic|warn): \[\d+\]", head, re.M))
