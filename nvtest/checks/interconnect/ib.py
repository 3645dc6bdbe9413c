"""The InfiniBand / RoCE checks (suites/interconnect/test_ib.py): port state per HCA, then
bandwidth between node pairs.

- :func:`ports` (``ib_ports``): ``ibstat`` and ``ibv_devinfo -v``: the SKU's HCAs present,
  every port Active and LinkUp at the SKU's rate with the recipe's link layer, the HCAs of the
  SKU's golden shape, and every active port's ``active_mtu`` at ``expect.ib_mtu`` (else the
  node's other HCAs' and the fleet's majority for the SKU).
- :func:`write_bw` (``ib_write_bw``): perftest between node pairs per HCA, scheduled in rounds;
  a failing pair blamed on the node common to the failures.
- :func:`tcp_bw` (``tcp_bw``): the same schedule with a TCP probe, on nodes with no RDMA device.

The RDMA NICs a node must have come from its PCI bus, its SKU (``expect.ib_hcas``) and sysfs
(:func:`nvtest.checks.interconnect.rdma.rdma_report`): only a node where none of them shows
one skips the RDMA checks; missing tools there are an ``error``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from nvtest.checks.api import (
    Fleet,
    Judge,
    Node,
    Probe,
    ProbeError,
    ProbeSkip,
    each_node,
    raw_output,
)
from nvtest.checks.hardware import Expected, expected_hcas, require_tool
from nvtest.checks.interconnect.pair_check import label_coverage, pair_report, report_node
from nvtest.checks.interconnect.rdma import (
    MTU_CAUSE,
    keyed_port_problems,
    mtu_problems,
    rdma_report,
)
from nvtest.checks.shape import golden_for, hca_shape, judge_shape
from nvtest.config.thresholds import SkuProfile
from nvtest.errors import NvtestError, ParseError, UnreportedHardware
from nvtest.jobs.base import launch_nodes, node_recipe, require_launched
from nvtest.jobs.pair_jobs import PerftestPairJob, TcpPairJob
from nvtest.parsers import ibstat, ibv_devinfo
from nvtest.parsers.ibstat import IbReport
from nvtest.session.facts import NodeFacts

__all__ = ["IBSTAT", "IBV_DEVINFO", "ports", "tcp_bw", "write_bw"]

IBSTAT = Probe("ibstat", command=("ibstat",), timeout_s=60, needs=("ibstat", "hca"))
IBV_DEVINFO = Probe("ibv_devinfo", command=("ibv_devinfo", "-v"), timeout_s=60, needs=("ibv_devinfo", "hca"))


def _ports(fleet: Fleet, node: Node, facts: NodeFacts) -> tuple[IbReport | None, str | None]:
    """The node's IB report from ibstat (else ibv_devinfo), and what the tool said if none."""
    ctx = fleet.ctx
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
            return None, (res.stderr.strip() or res.stdout.strip())[:200] or f"{tool} exit {res.exit_code}"
    return None, None


def _rdma(fleet: Fleet, node: Node, facts: NodeFacts) -> tuple[Expected, IbReport]:
    """(expected RDMA NICs, the node's report); skip, error or fail as :func:`rdma_report` says."""
    report, said = _ports(fleet, node, facts)
    st = fleet.ctx.states[node.name]
    return rdma_report(facts, st.match.profile if st.match else None, report, said)


def _fleet_hcas(fleet: Fleet) -> dict[str, dict[str, Any]]:
    """node -> {"hcas": (name, link layer, rate) of each HCA} for every node whose tools report
    (once per run)."""
    ctx = fleet.ctx

    def compute() -> dict[str, dict[str, Any]]:
        facts = {n.name: f for n in ctx.nodes if (f := ctx.states[n.name].facts) is not None}
        up = [n for n in ctx.nodes if n.name in facts and not ctx.states[n.name].down_reason]
        reports, _ = each_node(up, lambda n: _ports(fleet, n, facts[n.name])[0])
        return {name: {"hcas": hca_shape(r)} for name, r in reports.items() if r is not None and r.cas}

    return fleet.once("ib_ports:fleet-hcas", compute)


def _golden_hcas(fleet: Fleet, sku: SkuProfile | None) -> Any:
    """The golden HCA set of ``sku``'s nodes in this run (once per run and SKU)."""
    sku_name = sku.name if sku else None

    def compute() -> Any:
        hcas = _fleet_hcas(fleet)
        same = {n: s for n, s in hcas.items() if _sku_name(fleet, n) == sku_name}
        return golden_for("hcas", same, sku)

    return fleet.once(f"ib_write_bw:golden-hcas:{sku_name}", compute)


def _sku_name(fleet: Fleet, node: str) -> str | None:
    match = fleet.ctx.states[node].match
    return match.name if match else None


def _gpu_count(fleet: Fleet, node: Node) -> int:
    facts = fleet.ctx.states[node.name].facts
    return len(facts.gpus) if facts else 0


def _fleet_mtu(fleet: Fleet, sku: SkuProfile | None) -> int | None:
    """The active_mtu most active ports of ``sku``'s nodes run (ibv_devinfo), when two or more
    nodes report; None otherwise (the node is then judged against itself)."""
    ctx = fleet.ctx

    def compute() -> dict[str | None, Counter[int]]:
        out: dict[str | None, Counter[int]] = {}
        up = [
            n
            for n in ctx.nodes
            if (st := ctx.states[n.name]).facts is not None and not st.down_reason and st.facts.tools.get("ibv_devinfo")
        ]
        reps, _ = each_node(up, lambda n: ibv_devinfo.parse(raw_output(ctx, IBV_DEVINFO, n, ctx.nodes).stdout))
        for name, rep in reps.items():
            st = ctx.states[name]
            mtus = [p.active_mtu for ca in rep.cas for p in ca.ports if p.active and p.active_mtu]
            if mtus:
                node_mtu = Counter(mtus).most_common(1)[0][0]
                out.setdefault(st.match.name if st.match else None, Counter())[node_mtu] += 1
        return out

    counts = fleet.once("ib_ports:fleet-mtu", compute).get(sku.name if sku else None)
    if not counts or sum(counts.values()) < 2:
        return None
    return counts.most_common(1)[0][0]


def ports(fleet: Fleet, node: Node, node_facts: NodeFacts, sku: SkuProfile | None, judge: Judge) -> None:
    """Check ``ib_ports`` on ``node``: its HCAs against the SKU and the fleet's golden shape,
    every port's state, rate and link layer, every active port's MTU.

    Raises:
        ProbeSkip: no RDMA NIC on the node's bus, SKU or sysfs (their words).
        ProbeError: the node must have RDMA NICs and no tool to read them is there.
    """
    ctx = fleet.ctx
    _, report = _rdma(fleet, node, node_facts)
    judge_shape(judge, ctx, node, ("hcas", "hca_pci"), _fleet_hcas(fleet), extra_key="ibstat")
    expect = sku.expect if sku else None
    if node_facts.tools.get("ibv_devinfo"):
        text = raw_output(ctx, IBV_DEVINFO, node, ctx.nodes).stdout
        devinfo = ibv_devinfo.parse(text)
        if node_facts.tools.get("ibstat"):
            judge.detail("ibv_devinfo", {ca.name: [p.link_layer for p in ca.ports] for ca in devinfo.cas})
            only = sorted({c.name for c in report.cas} ^ {c.name for c in devinfo.cas})
            if only:
                judge.fail(f"ibstat and ibv_devinfo disagree on the HCAs: {', '.join(only)}")
        judge.detail("active_mtu", {f"{ca.name}/{p.port}": p.active_mtu for ca in devinfo.cas for p in ca.ports})
        majority = None if expect and expect.ib_mtu else _fleet_mtu(fleet, sku)
        for problem in mtu_problems(devinfo, text, expect.ib_mtu if expect else None, majority):
            judge.fail(problem, MTU_CAUSE)
    else:
        judge.detail("active_mtu", "not measured: ibv_devinfo is not on the node (ibstat prints no MTU)")
    if report.failure is not None:  # e.g. ibstat's ibpanic after part of its report
        judge.fail(f"the RDMA tool failed: {report.failure.reason}")
    judge("hca_count", len(report.cas), "count")
    for ca in report.cas:
        for port in ca.ports:
            judge("rate_gbps", port.rate_gbps, "Gb/s", hca=ca.name, port=port.port)
    for problem, cause in keyed_port_problems(
        report,
        node_recipe(ctx, node, "ib_ports"),
        expect.ib_hcas if expect else None,
        expect.ib_rate_gbps if expect else None,
    ):
        judge.fail(problem, cause)


def _active_hcas(fleet: Fleet, node: Node) -> list[str]:
    st = fleet.ctx.states[node.name]
    wanted = node_recipe(fleet.ctx, node, "ib_write_bw").get("hcas")
    if wanted:
        return list(wanted)
    report, _ = _ports(fleet, node, st.facts) if st.facts else (None, None)
    return [ca.name for ca in report.cas if any(p.active for p in ca.ports)] if report else []


def write_bw(fleet: Fleet, node: Node, node_facts: NodeFacts, sku: SkuProfile | None, judge: Judge) -> None:
    """Check ``ib_write_bw`` on ``node``: every HCA of the golden shape measured against a peer
    (perftest, pairs in rounds, once per run); an HCA the node lacks fails it, and one never
    measured because every peer lacked it is an error naming those peers.

    Raises:
        ProbeSkip: no RDMA NIC on the node (its bus's words).
        ProbeError: perftest missing where RDMA NICs are expected, or an HCA never measured.
        NodeError: the node is left out of the schedule (an earlier check failed or hung on it).
    """
    ctx = fleet.ctx
    exp, _ = _rdma(fleet, node, node_facts)
    require_tool(node_facts, exp, "ib_write_bw", "perftest")
    by_name = ctx.inventory.by_name()
    rdma = _rdma_nodes(fleet, "ib_write_bw")
    require_launched(ctx, "ib_write_bw", node, judge.detail, remaining=rdma)
    job = PerftestPairJob(
        ctx,
        hcas=lambda n: _active_hcas(fleet, n),
        recipe=lambda n: node_recipe(ctx, n, "ib_write_bw"),
        gpus=lambda n: _gpu_count(fleet, n),
    )
    report = pair_report(ctx, "ib_write_bw", job, rdma)
    gold = _golden_hcas(fleet, sku)
    names = [str(i[0]) for i in gold.items] if gold is not None and gold.items is not None else None
    mine = _active_hcas(fleet, node)
    cover = label_coverage(report, node.name, mine, names, lambda peer: job.labels(node, by_name[peer]))
    judge.detail("effective", cover.effective(mine))
    for hca in cover.lacking:
        judge.fail(
            f"HCA {hca} not measured: this node lacks it (golden {gold.describe() if gold else '?'})", "hca:missing"
        )
    report_node(judge, report, node, job.metric, "Gb/s")
    if cover.never and not judge.verdict.is_bad:
        why = "; ".join(
            f"{h}: left out with {', '.join(cover.left_out.get(h, ['every peer']))} (they lack it)" for h in cover.never
        )
        raise ProbeError(f"HCA(s) of this node never measured: {why}")


def _rdma_expected(fleet: Fleet, node: Node) -> bool:
    """The node must have RDMA NICs (PCI bus, SKU, sysfs, or its tools list HCAs)."""
    st = fleet.ctx.states[node.name]
    if st.facts is None:
        return False
    report, _ = _ports(fleet, node, st.facts) if not st.down_reason else (None, None)
    return expected_hcas(st.facts, st.match.profile if st.match else None, len(report.cas) if report else 0).count > 0


def _rdma_nodes(fleet: Fleet, check: str) -> list[Node]:
    """The check's reachable nodes whose RDMA devices its tools can measure, once per run, less
    the nodes an earlier check failed or hung on (:func:`~nvtest.jobs.base.known_bad`)."""
    return fleet.once(f"{check}:rdma", lambda: [n for n in launch_nodes(fleet.ctx, check) if _has_rdma(fleet, n)])


def _has_rdma(fleet: Fleet, node: Node) -> bool:
    facts = fleet.ctx.states[node.name].facts
    if facts is None or not facts.tools.get("ib_write_bw"):
        return False
    try:
        _rdma(fleet, node, facts)
    except (ProbeSkip, NvtestError, UnreportedHardware):
        return False
    return True


def tcp_bw(fleet: Fleet, node: Node, judge: Judge) -> None:
    """Check ``tcp_bw`` on ``node``: TCP bandwidth between pairs of the nodes without RDMA NICs.

    Raises:
        ProbeSkip: the node has RDMA NICs (ib_write_bw measures them), or fewer than two
            nodes without.
        NodeError: the node is left out of the schedule (an earlier check failed or hung on it).
    """
    ctx = fleet.ctx
    if _rdma_expected(fleet, node):
        raise ProbeSkip("the node has RDMA NICs: ib_write_bw measures its links")
    targets = fleet.once(
        "tcp_bw:no-rdma", lambda: [n for n in launch_nodes(ctx, "tcp_bw") if not _rdma_expected(fleet, n)]
    )
    require_launched(ctx, "tcp_bw", node, judge.detail, remaining=targets)
    if len(targets) < 2:
        raise ProbeSkip(f"a pair test needs two nodes without RDMA; this run has {len(targets)}")
    recipe = node_recipe(ctx, targets[0], "tcp_bw")
    job = TcpPairJob(ctx, seconds=float(recipe.get("seconds", 2.0)), streams=int(recipe.get("streams", 1)))
    report_node(judge, pair_report(ctx, "tcp_bw", job, targets), node, job.metric, "Gb/s")
