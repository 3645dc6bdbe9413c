"""Must a node have RDMA devices, did its tools report them, are its ports what the SKU says
(pure). Fail closed: see :mod:`nvtest.checks.hardware`."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from nvtest.checks.hardware import Expected, expected_hcas, require, unreported
from nvtest.config.thresholds import SkuProfile
from nvtest.errors import ProbeError
from nvtest.parsers.ibstat import IbReport
from nvtest.session.facts import NodeFacts

__all__ = [
    "MTU_CAUSE",
    "MTU_LINE_RE",
    "PORT_DOWN",
    "keyed_port_problems",
    "mtu_lines",
    "mtu_problems",
    "port_problems",
    "rdma_report",
]


def rdma_report(
    facts: NodeFacts, sku: SkuProfile | None, report: IbReport | None, tool_error: str | None
) -> tuple[Expected, IbReport]:
    """The node's RDMA report where it must have RDMA NICs (PCI bus, SKU, sysfs, the tools).

    Raises:
        ProbeSkip: nothing expects an RDMA NIC and the PCI bus shows none (the reason names it).
        ProbeError: absence not proven, or ibstat and ibv_devinfo both missing on a node that
            has RDMA NICs (nothing measured).
        UnreportedHardware: the tool ran and listed no HCA (the tool's words).
    """
    exp = require(expected_hcas(facts, sku, len(report.cas) if report else 0))
    if not (facts.tools.get("ibstat") or facts.tools.get("ibv_devinfo")):
        raise ProbeError(
            f"no RDMA tools on a node with {exp.text()}: neither ibstat (infiniband-diags) "
            "nor ibv_devinfo (ibverbs-utils) on the node's PATH",
            cause="tool:missing",
        )
    if report is None or not report.cas:
        raise unreported(exp, "ibstat/ibv_devinfo", tool_error or "the tools list no HCA")
    return exp, report


#: The cause key of a port that is not Active/LinkUp (ibstat's or ibv_devinfo's state).
PORT_DOWN = "ib:port_down"


def port_problems(
    report: IbReport, recipe: Mapping[str, Any], expect_hcas: int | None, expect_rate: float | None
) -> list[str]:
    """Every way the ports differ from the SKU: missing HCAs (count or names), ports not
    Active/LinkUp, rate below ``expect_rate`` (Gb/s), link layer other than ``recipe.link_layer``."""
    return [line for line, _ in keyed_port_problems(report, recipe, expect_hcas, expect_rate)]


def keyed_port_problems(
    report: IbReport, recipe: Mapping[str, Any], expect_hcas: int | None, expect_rate: float | None
) -> list[tuple[str, str | None]]:
    """:func:`port_problems`, each line with its cause key: ``hca:missing`` (fewer HCAs than the
    SKU, or the recipe's HCAs the node lacks), ``ib:port_down`` (a port not Active/LinkUp: the
    line quotes the tool's port state), ``ib:rate_low``, ``ib:link_layer``."""
    out: list[tuple[str, str | None]] = []
    names = [ca.name for ca in report.cas]
    if expect_hcas is not None and len(names) < expect_hcas:
        out.append((f"{len(names)} HCAs, SKU expects {expect_hcas}", "hca:missing"))
    wanted: Sequence[str] = recipe.get("hcas") or ()
    missing = [h for h in wanted if h not in names]
    if missing:
        out.append((f"expected HCA(s) missing: {', '.join(missing)}", "hca:missing"))
    layer = recipe.get("link_layer")
    for ca in report.cas:
        for port in ca.ports:
            where = f"{ca.name} port {port.port}"
            if port.problem:
                out.append((f"{where}: {port.problem}", PORT_DOWN))
                continue
            if expect_rate and (port.rate_gbps or 0) < expect_rate:
                out.append((f"{where}: rate {port.rate_gbps} Gb/s < {expect_rate:g} Gb/s", "ib:rate_low"))
            if layer and port.link_layer and port.link_layer != layer:
                out.append((f"{where}: link layer {port.link_layer}, SKU expects {layer}", "ib:link_layer"))
    return out


#: The cause key of every line :func:`mtu_problems` gives (a port at another MTU).
MTU_CAUSE = "ib:mtu"

#: ``ibv_devinfo`` (libibverbs-utils): ``hca_id: mlx5_0``, ``port:   1`` and
#: The largest (and, on a healthy fabric, the active) InfiniBand MTU, bytes (IBTA: 256 to
#: 4096); ``nvtest parse perftest`` warns below it on an IB link, having no SKU's ``ib_mtu``.
IB_MAX_MTU = 4096

#: ``active_mtu:             4096 (5)`` lines, the ones an MTU verdict quotes.
MTU_LINE_RE = re.compile(r"^\s*(hca_id|port|active_mtu):\s*(.*?)\s*$")


def mtu_lines(text: str) -> dict[tuple[str, int], tuple[int, str]]:
    """(HCA, port) -> (1-based line number, the ``active_mtu`` line as printed) of an
    ``ibv_devinfo`` output, so that a verdict names the tool's own line."""
    out: dict[tuple[str, int], tuple[int, str]] = {}
    hca, port = "", 0
    for no, line in enumerate(text.splitlines(), 1):
        m = MTU_LINE_RE.match(line)
        if m is None:
            continue
        key, value = m.groups()
        if key == "hca_id":
            hca, port = value, 0
        elif key == "port":
            port = int(value) if value.isdigit() else 0
        else:
            out[(hca, port)] = (no, line.strip())
    return out


def mtu_problems(report: IbReport, text: str, expected: int | None, fleet_mtu: int | None = None) -> list[str]:
    """Why the active ports' ``active_mtu`` (``ibv_devinfo``; ``report`` parsed from ``text``)
    is not what it must be: ``expected`` (the SKU's ``expect.ib_mtu``, bytes) on InfiniBand
    ports where set; otherwise (RoCE ports: it follows the netdev MTU) equal to ``fleet_mtu``
    (the fleet's majority for the SKU) where given, else the same on every active port of the
    node with the same link layer. Each problem names the HCA, the port and the tool's line."""
    lines = mtu_lines(text)
    ports = [(ca.name, p) for ca in report.cas for p in ca.ports if p.active and p.active_mtu]
    if not ports:
        return []
    by_layer: dict[str | None, Counter[int]] = {}
    for _, p in ports:
        by_layer.setdefault(p.link_layer, Counter())[p.active_mtu or 0] += 1
    out = []
    for hca, p in ports:
        if expected is not None and p.link_layer in (None, "InfiniBand"):
            want, why = expected, "the SKU expects {want} (expect.ib_mtu)"
        elif fleet_mtu is not None:
            want, why = fleet_mtu, "the fleet's majority is {want}"
        else:
            want = by_layer[p.link_layer].most_common(1)[0][0]
            why = f"the node's other {p.link_layer or ''} HCAs run {{want}}".replace("  ", " ")
        if p.active_mtu == want:
            continue
        no, line = lines.get((hca, p.port), (0, f"active_mtu: {p.active_mtu}"))
        said = f"'{line}' (ibv_devinfo line {no})" if no else f"'{line}'"
        out.append(f"{hca} port {p.port}: active_mtu {p.active_mtu}, {why.format(want=want)}: {said}")
    return out
