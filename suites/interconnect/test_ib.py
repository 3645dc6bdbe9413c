"""InfiniBand / RoCE: port state per HCA, then bandwidth between node pairs.

- ``ib_ports``: ``ibstat`` and ``ibv_devinfo -v`` (nvtest's parsers): the SKU's HCAs present
  (count, and names when the recipe lists them), every port Active and LinkUp, at the SKU's
  rate, with the link layer the recipe names (InfiniBand or Ethernet for RoCE); the
  ``active_mtu`` of every active port (``ibv_devinfo``; ibstat prints none) at the SKU's
  ``expect.ib_mtu`` on InfiniBand ports, else the same as the node's other HCAs and the
  fleet's majority for the SKU: a port that differs fails naming the HCA and the tool's line.
- ``ib_write_bw``: perftest between node pairs per HCA, scheduled in rounds (ring by default;
  all-pairs or random matchings by recipe), servers first, clients once the servers listen; a
  failing pair is blamed on the node common to the failures and confirmed by re-pairing it
  with a known-good node. The exact command lines are in each item's details.
- ``tcp_bw``: where a node has no RDMA device, the same schedule with a TCP bandwidth probe,
  so the pairs still run for real.

The RDMA NICs a node must have come from its PCI bus (Mellanox functions), its SKU
(``expect.ib_hcas``) and sysfs (``/sys/class/infiniband``): only a node where none of them
shows one skips the RDMA checks, naming the bus readings; missing tools there are an
``error``, and a tool that lists no HCA fails with its words. The HCAs must match the
SKU's golden shape (``expect.hcas``, else the fleet's majority): a node with an HCA
missing or named differently fails ``ib_ports`` with the difference, and the pair test
names every HCA it had to leave out because a peer lacked it (an HCA never measured is an
``error`` of its node, never a quiet pass).
"""

from __future__ import annotations

from collections import Counter

import pytest

from nvtest.checks.api import Judge, Probe, ProbeError, ProbeSkip, each_node, raw_output
from nvtest.checks.hardware import expected_hcas, require_tool
from nvtest.checks.interconnect.pair_check import label_coverage, pair_report, report_node
from nvtest.checks.interconnect.rdma import mtu_problems, port_problems, rdma_report
from nvtest.checks.shape import golden_for, hca_shape, judge_shape
from nvtest.config.thresholds import SkuProfile
from nvtest.errors import NvtestError, ParseError, UnreportedHardware
from nvtest.jobs.base import fleet_cache, launch_nodes, node_recipe, require_launched
from nvtest.jobs.pair_jobs import PerftestPairJob, TcpPairJob
from nvtest.parsers import ibstat, ibv_devinfo
from nvtest.parsers.ibstat import IbReport
from nvtest.session.facts import NodeFacts

IBSTAT = Probe("ibstat", command=("ibstat",), timeout_s=60, needs=("ibstat", "hca"))
IBV_DEVINFO = Probe("ibv_devinfo", command=("ibv_devinfo", "-v"), timeout_s=60, needs=("ibv_devinfo", "hca"))


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
            report = parser.parse(res.stdout)
            if report.failure is not None and not report.cas:
                return None, report.failure.message  # the tool's words (No IB devices found, ...)
            return report, None
        except ParseError:
            return None, (res.stderr.strip() or res.stdout.strip())[
                :200
            ] or f"{tool} exit {res.exit_code}"
    return None, None


def _rdma(ctx, node, facts: NodeFacts):
    """(expected RDMA NICs, the node's report); skip, error or fail as :func:`rdma_report` says."""
    report, said = _ports(ctx, node, facts)
    st = ctx.states[node.name]
    return rdma_report(facts, st.match.profile if st.match else None, report, said)


def _fleet_hcas(ctx) -> dict[str, dict]:
    """node -> {"hcas": (name, link layer, rate) of each HCA} for every node whose tools report."""
    up = [n for n in ctx.nodes if ctx.states[n.name].facts is not None and not ctx.states[n.name].down_reason]
    reports, _ = each_node(up, lambda n: _ports(ctx, n, ctx.states[n.name].facts)[0])
    return {name: {"hcas": hca_shape(r)} for name, r in reports.items() if r is not None and r.cas}


def _golden_hcas(ctx, sku: SkuProfile | None):
    """The golden HCA set of ``sku``'s nodes in this run (once per run and SKU)."""
    sku_name = sku.name if sku else None
    hcas = fleet_cache(ctx).get("ib_ports:fleet-hcas", lambda: _fleet_hcas(ctx))
    fleet = {n: s for n, s in hcas.items() if (ctx.states[n].match.name if ctx.states[n].match else None) == sku_name}
    return golden_for("hcas", fleet, sku)


def _fleet_mtu(ctx, sku: SkuProfile | None) -> int | None:
    """The active_mtu most active ports of ``sku``'s nodes run (ibv_devinfo), when two or more
    nodes report; None otherwise (the node is then judged against itself)."""

    def fleet() -> dict[str | None, Counter]:
        out: dict[str | None, Counter] = {}
        up = [
            n for n in ctx.nodes
            if (st := ctx.states[n.name]).facts is not None and not st.down_reason
            and st.facts.tools.get("ibv_devinfo")
        ]  # fmt: skip
        reps, _ = each_node(up, lambda n: ibv_devinfo.parse(raw_output(ctx, IBV_DEVINFO, n, ctx.nodes).stdout))
        for name, rep in reps.items():
            st = ctx.states[name]
            mtus = [p.active_mtu for ca in rep.cas for p in ca.ports if p.active and p.active_mtu]
            if mtus:
                node_mtu = Counter(mtus).most_common(1)[0][0]
                out.setdefault(st.match.name if st.match else None, Counter())[node_mtu] += 1
        return out

    counts = fleet_cache(ctx).get("ib_ports:fleet-mtu", fleet).get(sku.name if sku else None)
    if not counts or sum(counts.values()) < 2:
        return None
    return counts.most_common(1)[0][0]


@pytest.mark.check(
    "ib_ports", area="interconnect", title="IB/RoCE ports: HCAs, state, rate, link layer"
)
def test_ib_ports(
    node, node_facts: NodeFacts, nvtest_context, sku: SkuProfile | None, judge: Judge
) -> None:
    _, report = _rdma(nvtest_context, node, node_facts)
    hcas = fleet_cache(nvtest_context).get("ib_ports:fleet-hcas", lambda: _fleet_hcas(nvtest_context))
    judge_shape(judge, nvtest_context, node, ("hcas", "hca_pci"), hcas, extra_key="ibstat")
    expect = sku.expect if sku else None
    if node_facts.tools.get("ibv_devinfo"):
        text = raw_output(nvtest_context, IBV_DEVINFO, node, nvtest_context.nodes).stdout
        devinfo = ibv_devinfo.parse(text)
        if node_facts.tools.get("ibstat"):
            judge.detail(
                "ibv_devinfo", {ca.name: [p.link_layer for p in ca.ports] for ca in devinfo.cas}
            )
            only = sorted({c.name for c in report.cas} ^ {c.name for c in devinfo.cas})
            if only:
                judge.fail(f"ibstat and ibv_devinfo disagree on the HCAs: {', '.join(only)}")
        judge.detail("active_mtu", {f"{ca.name}/{p.port}": p.active_mtu for ca in devinfo.cas for p in ca.ports})
        fleet = None if expect and expect.ib_mtu else _fleet_mtu(nvtest_context, sku)
        for problem in mtu_problems(devinfo, text, expect.ib_mtu if expect else None, fleet):
            judge.fail(problem)
    else:
        judge.detail("active_mtu", "not measured: ibv_devinfo is not on the node (ibstat prints no MTU)")
    if report.failure is not None:  # e.g. ibstat's ibpanic after part of its report
        judge.fail(f"the RDMA tool failed: {report.failure.reason}")
    judge("hca_count", len(report.cas), "count")
    for ca in report.cas:
        for port in ca.ports:
            judge("rate_gbps", port.rate_gbps, "Gb/s", hca=ca.name, port=port.port)
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
def test_ib_write_bw(
    node, node_facts: NodeFacts, nvtest_context, judge: Judge, sku: SkuProfile | None
) -> None:
    """Every HCA of the golden shape measured against a peer; an HCA the node lacks fails it,
    and one never measured because every peer lacked it is an error naming those peers."""
    exp, _ = _rdma(nvtest_context, node, node_facts)
    require_tool(node_facts, exp, "ib_write_bw", "perftest")
    ctx = nvtest_context
    by_name = ctx.inventory.by_name()
    rdma = _rdma_nodes(ctx, "ib_write_bw")
    require_launched(ctx, "ib_write_bw", node, judge.detail, remaining=rdma)
    job = PerftestPairJob(
        ctx,
        hcas=lambda n: _active_hcas(ctx, n),
        recipe=lambda n: node_recipe(ctx, n, "ib_write_bw"),
        gpus=lambda n: len(ctx.states[n.name].facts.gpus) if ctx.states[n.name].facts else 0,
    )
    report = pair_report(ctx, "ib_write_bw", job, rdma)
    sku_name = sku.name if sku else None
    gold = fleet_cache(ctx).get(f"ib_write_bw:golden-hcas:{sku_name}", lambda: _golden_hcas(ctx, sku))
    names = [str(i[0]) for i in gold.items] if gold is not None and gold.items is not None else None
    mine = _active_hcas(ctx, node)
    cover = label_coverage(report, node.name, mine, names, lambda peer: job.labels(node, by_name[peer]))
    judge.detail("effective", cover.effective(mine))
    for hca in cover.lacking:
        judge.fail(f"HCA {hca} not measured: this node lacks it (golden {gold.describe() if gold else '?'})")
    report_node(judge, report, node, job.metric, "Gb/s")
    if cover.never and not judge.verdict.is_bad:
        why = "; ".join(
            f"{h}: left out with {', '.join(cover.left_out.get(h, ['every peer']))} (they lack it)"
            for h in cover.never
        )
        raise ProbeError(f"HCA(s) of this node never measured: {why}")


def _rdma_expected(ctx, node) -> bool:
    """The node must have RDMA NICs (PCI bus, SKU, sysfs, or its tools list HCAs)."""
    st = ctx.states[node.name]
    if st.facts is None:
        return False
    report, _ = _ports(ctx, node, st.facts) if not st.down_reason else (None, None)
    return expected_hcas(st.facts, st.match.profile if st.match else None, len(report.cas) if report else 0).count > 0


def _rdma_nodes(ctx, check: str) -> list:
    """The check's reachable nodes whose RDMA devices its tools can measure, once per run, less
    the nodes an earlier check failed or hung on (:func:`~nvtest.jobs.base.known_bad`)."""
    return fleet_cache(ctx).get(f"{check}:rdma", lambda: [n for n in launch_nodes(ctx, check) if _has_rdma(ctx, n)])


def _has_rdma(ctx, node) -> bool:
    facts = ctx.states[node.name].facts
    if facts is None or not facts.tools.get("ib_write_bw"):
        return False
    try:
        _rdma(ctx, node, facts)
    except (ProbeSkip, NvtestError, UnreportedHardware):
        return False
    return True


@pytest.mark.check(
    "tcp_bw", area="interconnect", title="TCP bandwidth between node pairs (no RDMA device)"
)
def test_tcp_bw(node, node_facts: NodeFacts, nvtest_context, judge: Judge) -> None:
    ctx = nvtest_context
    if _rdma_expected(ctx, node):
        raise ProbeSkip("the node has RDMA NICs: ib_write_bw measures its links")
    targets = fleet_cache(ctx).get(
        "tcp_bw:no-rdma", lambda: [n for n in launch_nodes(ctx, "tcp_bw") if not _rdma_expected(ctx, n)]
    )
    require_launched(ctx, "tcp_bw", node, judge.detail, remaining=targets)
    if len(targets) < 2:
        raise ProbeSkip(f"a pair test needs two nodes without RDMA; this run has {len(targets)}")
    recipe = node_recipe(ctx, targets[0], "tcp_bw")
    job = TcpPairJob(
        ctx, seconds=float(recipe.get("seconds", 2.0)), streams=int(recipe.get("streams", 1))
    )
    report_node(judge, pair_report(ctx, "tcp_bw", job, targets), node, job.metric, "Gb/s")
