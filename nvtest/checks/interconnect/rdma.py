"""Is there an RDMA device on a node, and are its ports what the SKU says (pure)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from nvtest.parsers.ibstat import IbReport

__all__ = ["port_problems", "rdma_absent_reason"]


def rdma_absent_reason(
    tools: Mapping[str, str | None], report: IbReport | None, tool_error: str | None
) -> str | None:
    """Why the node has no usable RDMA device, or None when it has one.

    Args:
        tools: the node's tool paths (inventory probe), e.g. ``{"ibstat": "/usr/sbin/ibstat"}``.
        report: the node's parsed ibstat/ibv_devinfo output, None when it could not be read.
        tool_error: what the tool said when it found nothing (``No IB devices found``).
    """
    if not (tools.get("ibstat") or tools.get("ibv_devinfo")):
        return "no RDMA tools: neither ibstat (infiniband-diags) nor ibv_devinfo (ibverbs-utils) on the node"
    if report is None or not report.cas:
        return f"no RDMA device: {tool_error or 'the tools list no HCA'}"
    return None  # ports that are down are a failure of ib_ports, not a reason to skip


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
