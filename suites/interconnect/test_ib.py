"""InfiniBand / RoCE: port state per HCA, then bandwidth between node pairs.

- ``ib_ports``: ``ibstat`` and ``ibv_devinfo -v`` (nvtest's parsers): the SKU's HCAs present
  (count, and names when the recipe lists them), every port Active and LinkUp, at the SKU's
  rate, with the link layer the recipe names (InfiniBand or Ethernet for RoCE).
- ``ib_write_bw``: perftest between node pairs per HCA, scheduled in rounds (ring by default;
  all-pairs or random matchings by recipe), servers first, clients once the servers listen; a
  failing pair is blamed on the node common to the failures and confirmed by re-pairing it
  with a known-good node. The exact command lines are in each item's details.
- ``tcp_bw``: where a node has no RDMA device, the same schedule with a TCP bandwidth probe,
  so the pairs still run for real.

A node with no RDMA tools or devices skips the RDMA checks with the reason.
"""

from __future__ import annotations

import pytest

from nvtest.checks.api import Judge, Probe, ProbeSkip, raw_output
from nvtest.checks.interconnect.pair_check import pair_report, report_node
from nvtest.checks.interconnect.rdma import port_problems, rdma_absent_reason
from nvtest.config.thresholds import SkuProfile
from nvtest.errors import ParseError
from nvtest.jobs.base import check_nodes, fleet_cache, node_recipe
from nvtest.jobs.pair_jobs import PerftestPairJob, TcpPairJob
from nvtest.parsers import ibstat, ibv_devinfo
from nvtest.parsers.ibstat import IbReport
from nvtest.session.facts import NodeFacts

IBSTAT = Probe("ibstat", command=("ibstat",), timeout_s=60)
IBV_DEVINFO = Probe("ibv_devinfo", command=("ibv_devinfo", "-v"), timeout_s=60)


def _ports(ctx, node, facts: NodeFacts) -> tuple[IbReport | None, str | None]:
    """The node's IB report from ibstat (else ibv_devinfo), and what the tool said if none."""
    for tool, probe, parser in (
        ("ibstat", IBSTAT, ibstat),
        ("ibv_devinfo", IBV_DEVINFO, ibv_devinfo),
    ):
        if not facts.tools.get(tool):
            continue
        res = raw_output(ctx, probe, node, ctx.nodes)
        try:
            return parser.parse(res.stdout), None
        except ParseError:
            return None, (res.stderr.strip() or res.stdout.strip())[
                :200
            ] or f"{tool} exit {res.exit_code}"
    return None, None


def _rdma_skip(ctx, node, facts: NodeFacts) -> IbReport:
    report, said = _ports(ctx, node, facts)
    reason = rdma_absent_reason(facts.tools, report, said)
    if reason:
        raise ProbeSkip(reason)
    assert report is not None
    return report


@pytest.mark.check(
    "ib_ports", area="interconnect", title="IB/RoCE ports: HCAs, state, rate, link layer"
)
def test_ib_ports(
    node, node_facts: NodeFacts, nvtest_context, sku: SkuProfile | None, judge: Judge
) -> None:
    report = _rdma_skip(nvtest_context, node, node_facts)
    if node_facts.tools.get("ibv_devinfo") and node_facts.tools.get("ibstat"):
        devinfo = ibv_devinfo.parse(
            raw_output(nvtest_context, IBV_DEVINFO, node, nvtest_context.nodes).stdout
        )
        judge.detail(
            "ibv_devinfo", {ca.name: [p.link_layer for p in ca.ports] for ca in devinfo.cas}
        )
        only = sorted({c.name for c in report.cas} ^ {c.name for c in devinfo.cas})
        if only:
            judge.fail(f"ibstat and ibv_devinfo disagree on the HCAs: {', '.join(only)}")
    judge("hca_count", len(report.cas), "count")
    for ca in report.cas:
        for port in ca.ports:
            judge("rate_gbps", port.rate_gbps, "Gb/s", hca=ca.name, port=port.port)
    expect = sku.expect if sku else None
    for problem in port_problems(
        report,
        node_recipe(nvtest_context, node, "ib_ports"),
        expect.ib_hcas if expect else None,
        expect.ib_rate_gbps if expect else None,
    ):
        judge.fail(problem)


def _active_hcas(ctx, node) -> list[str]:
    st = ctx.states[node.name]
    wanted = node_recipe(ctx, node, "ib_write_bw").get("hcas")
    if wanted:
        return list(wanted)
    report, _ = _ports(ctx, node, st.facts) if st.facts else (None, None)
    return [ca.name for ca in report.cas if any(p.active for p in ca.ports)] if report else []


@pytest.mark.check(
    "ib_write_bw", area="interconnect", title="RDMA write bandwidth between node pairs (perftest)"
)
def test_ib_write_bw(node, node_facts: NodeFacts, nvtest_context, judge: Judge) -> None:
    _rdma_skip(nvtest_context, node, node_facts)
    if not node_facts.tools.get("ib_write_bw"):
        raise ProbeSkip("perftest not installed: ib_write_bw not found on the node's PATH")
    ctx = nvtest_context
    rdma = _rdma_nodes(ctx, "ib_write_bw", True)
    job = PerftestPairJob(
        ctx,
        hcas=lambda n: _active_hcas(ctx, n),
        recipe=lambda n: node_recipe(ctx, n, "ib_write_bw"),
        gpus=lambda n: len(ctx.states[n.name].facts.gpus) if ctx.states[n.name].facts else 0,
    )
    report_node(judge, pair_report(ctx, "ib_write_bw", job, rdma), node, job.metric, "Gb/s")


def _rdma_nodes(ctx, check: str, rdma: bool) -> list:
    """The check's reachable nodes with (``rdma``) or without RDMA devices, once per run."""
    return fleet_cache(ctx).get(
        f"{check}:rdma={rdma}", lambda: [n for n in check_nodes(ctx, check) if _has_rdma(ctx, n) is rdma]
    )


def _has_rdma(ctx, node) -> bool:
    facts = ctx.states[node.name].facts
    if facts is None or not facts.tools.get("ib_write_bw"):
        return False
    report, said = _ports(ctx, node, facts)
    return rdma_absent_reason(facts.tools, report, said) is None


@pytest.mark.check(
    "tcp_bw", area="interconnect", title="TCP bandwidth between node pairs (no RDMA device)"
)
def test_tcp_bw(node, node_facts: NodeFacts, nvtest_context, judge: Judge) -> None:
    ctx = nvtest_context
    if _has_rdma(ctx, node):
        raise ProbeSkip("the node has RDMA devices: ib_write_bw measures its links")
    targets = _rdma_nodes(ctx, "tcp_bw", False)
    if len(targets) < 2:
        raise ProbeSkip(f"a pair test needs two nodes without RDMA; this run has {len(targets)}")
    recipe = node_recipe(ctx, targets[0], "tcp_bw")
    job = TcpPairJob(
        ctx, seconds=float(recipe.get("seconds", 2.0)), streams=int(recipe.get("streams", 1))
    )
    report_node(judge, pair_report(ctx, "tcp_bw", job, targets), node, job.metric, "Gb/s")
