"""The per-node side of a pair check: pick the schedule, run it once, report a node's share.

Schedule settings come from the recipe section of the check in the first node's SKU profile
(``recipe.<check>.pairs``: ``schedule`` ring | all-pairs | random, ``k``, ``seed``,
``max_concurrent_pairs``), overridden by ``$NVTEST_PAIR_SCHEDULE`` on the controller.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nvtest.checks.api import Judge, NodeError
from nvtest.config.inventory import Node
from nvtest.jobs.base import controller_env, launch_nodes, node_recipe
from nvtest.jobs.pair_runner import PairJob, PairReport, node_value, run_pair_schedule
from nvtest.jobs.pairs import build_schedule

if TYPE_CHECKING:
    from nvtest.session.context import RunContext

__all__ = ["LabelCoverage", "label_coverage", "pair_report", "report_node"]


def pair_report(ctx: RunContext, check: str, job: PairJob, nodes: list[Node] | None = None) -> PairReport:
    """Run ``job`` over ``nodes`` (default: the check's nodes less those an earlier check
    failed or hung on, :func:`~nvtest.jobs.base.launch_nodes`) once per run (cached); later
    callers read it."""

    def compute() -> PairReport:
        targets = nodes if nodes is not None else launch_nodes(ctx, check)
        if len(targets) < 2:
            raise NodeError(f"a pair test needs two nodes; {len(targets)} reachable: {[n.name for n in targets]}")
        settings: dict[str, Any] = dict(node_recipe(ctx, targets[0], check).get("pairs") or {})
        name = controller_env("NVTEST_PAIR_SCHEDULE") or str(settings.get("schedule", "ring"))
        schedule = build_schedule(
            name,
            [n.name for n in targets],
            k=int(settings.get("k", 3)),
            seed=int(settings.get("seed", 0)),
        )
        return run_pair_schedule(
            ctx,
            job,
            targets,
            schedule,
            max_concurrent_pairs=int(settings.get("max_concurrent_pairs", 32)),
        )

    return ctx.fleet_cache.get(f"pairs:{check}", compute)


def report_node(judge: Judge, report: PairReport, node: Node, metric: str, unit: str) -> None:
    """Judge ``node``'s share of a pair report: its finding and its representative value.

    ``fail``: judge.fail with the blame reason; ``warn``: judge.warn; ``error``: NodeError;
    ``pass``: the value is judged against the SKU threshold (same floor the pairs met).
    """
    finding = report.findings.get(node.name)
    if finding is None:
        raise NodeError("this node took part in no pair test (it was down when the schedule was made)")
    judge.detail("schedule", {"name": report.schedule.name, "rounds": len(report.schedule.rounds)})
    judge.detail(
        "pairs",
        [
            {
                "pair": list(o.pair),
                "label": o.label,
                "status": o.status,
                "value": o.value,
                "unit": o.unit,
                "reason": o.reason,
                "round": o.round,
                "second_pass": o.second_pass,
                "command": o.command,
                "logs": o.logs,
            }
            for o in finding.outcomes
        ],
    )
    mine = [o.logs.get(node.name) for o in finding.outcomes if o.logs.get(node.name)]
    if mine:
        judge.log = mine[0]
    if finding.verdict == "error":
        raise NodeError(finding.reason, cause=finding.cause)
    value = node_value(finding)
    if finding.verdict == "fail":
        judge.fail(finding.reason)
        judge.cause = finding.cause
        if value is not None:
            judge(metric, value, unit)
        return
    if finding.verdict == "warn":
        judge.warn(finding.reason)
    elif finding.reason:
        judge.detail("note", finding.reason)
    judge(metric, value, unit)


@dataclass(frozen=True)
class LabelCoverage:
    """Which of a node's devices (pair labels: HCAs) a pair check measured, and why not.

    Attributes:
        lacking: golden devices the node does not have (a finding about the node: ``fail``).
        left_out: device -> the peers it was not measured with because they lack it.
        measured: devices measured in at least one pair.
        never: the node's devices measured in no pair (``error``: nothing proven).
    """

    lacking: tuple[str, ...] = ()
    left_out: dict[str, list[str]] = field(default_factory=dict)
    measured: tuple[str, ...] = ()
    never: tuple[str, ...] = ()

    def effective(self, requested: Sequence[str]) -> dict[str, Any]:
        """What ran beside what was asked, for the item's details."""
        return {
            "requested": list(requested),
            "measured": list(self.measured),
            "left_out": self.left_out,
            "lacking": list(self.lacking),
        }


def label_coverage(
    report: PairReport,
    node: str,
    mine: Sequence[str],
    golden: Sequence[str] | None,
    used_with: Callable[[str], Sequence[str]],
) -> LabelCoverage:
    """The coverage of ``node``'s devices ``mine`` in ``report``; ``used_with(peer)``: the labels
    the job ran with that peer (perftest: the HCAs both nodes have); ``golden``: the devices
    every node of the SKU must have (None: no golden shape)."""
    finding = report.findings.get(node)
    outcomes = finding.outcomes if finding else ()
    measured = sorted({o.label for o in outcomes if o.label}, key=str)
    left: dict[str, list[str]] = {}
    for peer in sorted({o.peer(node) for o in outcomes}):
        used = set(used_with(peer))
        for dev in mine:
            if dev not in used:
                left.setdefault(dev, []).append(peer)
    lacking = tuple(d for d in golden or () if d not in mine)
    never = tuple(d for d in mine if d not in measured)
    return LabelCoverage(lacking, left, tuple(measured), never)
