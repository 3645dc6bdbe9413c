"""InfiniBand / RoCE ports: every HCA port Active and LinkUp, at the SKU's rate.

Reads ``ibstat`` (infiniband-diags) through nvtest's ibstat parser. A node with
no RDMA tools or devices skips with the reason.
"""

from __future__ import annotations

import pytest

from nvtest.check import Judge, Probe
from nvtest.facts import NodeFacts
from nvtest.parsers import ibstat
from nvtest.thresholds import SkuProfile

IBSTAT = Probe("ibstat", command=("ibstat",), timeout_s=60)


@pytest.mark.check("ib_ports", area="interconnect", title="IB/RoCE ports: state, physical state, rate")
def test_ib_ports(node, node_facts: NodeFacts, raw, sku: SkuProfile | None, judge: Judge) -> None:
    if not node_facts.tools.get("ibstat"):
        pytest.skip("no RDMA tools: ibstat (infiniband-diags) not found on the node")
    res = raw(IBSTAT)
    if res.exit_code != 0 and not res.stdout.strip():
        pytest.skip(f"ibstat found no RDMA device (exit {res.exit_code}: {res.stderr.strip()[:200]})")
    report = ibstat.parse(res.stdout)
    expect = sku.expect if sku else None
    judge("hca_count", len(report.cas), "count")
    if expect and expect.ib_hcas is not None and len(report.cas) < expect.ib_hcas:
        judge.fail(f"{len(report.cas)} HCAs, SKU expects {expect.ib_hcas}")
    for ca in report.cas:
        for port in ca.ports:
            judge("rate_gbps", port.rate_gbps, "Gb/s", hca=ca.name, port=port.port)
            if port.problem:
                judge.fail(f"{ca.name} port {port.port}: {port.problem}")
            elif expect and expect.ib_rate_gbps and (port.rate_gbps or 0) < expect.ib_rate_gbps:
                judge.fail(f"{ca.name} port {port.port}: rate {port.rate_gbps} Gb/s < {expect.ib_rate_gbps} Gb/s")
