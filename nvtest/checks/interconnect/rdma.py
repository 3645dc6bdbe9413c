"""Must a node have RDMA devices, did its tools report them, are its ports what the SKU says
(pure). Fail closed: see :mod:`nvtest.checks.hardware`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from nvtest.checks.hardware import Expected, expected_hcas, require, unreported
from nvtest.config.thresholds import SkuProfile
from nvtest.errors import ProbeError
from nvtest.parsers.ibstat import IbReport
from nvtest.session.facts import NodeFacts

__all__ = ["port_problems", "rdma_report"]


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
            "nor ibv_devinfo (ibverbs-utils) on the node's PATH"
        )
    if report is None or not report.cas:
        raise unreported(exp, "ibstat/ibv_devinfo", tool_error or "the tools list no HCA")
    return exp, report


def port_problems(
    report: IbReport, recipe: Mapping[str, Any], expect_hcas: int | None, expect_rate: float | None
) -> list[str]:
    """Every way the ports differ from the SKU: missing HCAs (count or names), ports not
    Active/LinkUp, rate below ``expect_rate`` (Gb/s), link layer other than ``recipe.link_layer``."""
    out: list[str] = []
    names = [ca.name for ca in report.cas]
    if expect_hcas is not None and len(names) < expect_hcas:
        out.append(f"{len(names)} HCAs, SKU expects {expect_hcas}")
    wanted: Sequence[str] = recipe.get("hcas") or ()
    missing = [h for h in wanted if h not in names]
    if missing:
        out.append(f"expected HCA(s) missing: {', '.join(missing)}")
    layer = recipe.get("link_layer")
    for ca in report.cas:
        for port in ca.ports:
            where = f"{ca.name} port {port.port}"
            if port.problem:
                out.append(f"{where}: {port.problem}")
                continue
            if expect_rate and (port.rate_gbps or 0) < expect_rate:
                out.append(f"{where}: rate {port.rate_gbps} Gb/s < {expect_rate:g} Gb/s")
            if layer and port.link_layer and port.link_layer != layer:
                out.append(f"{where}: link layer {port.link_layer}, SKU expects {layer}")
    return out
