"""Multi-node phases inside a per-node report: one launch, one share per node.

A fleet-level check (a pair schedule, an mpirun over all nodes, a torchrun job) runs once per
run, when its first pytest item asks; the check's other items read their node's share from
the run's :class:`~nvtest.session.context.FleetCache` (``ctx.fleet_cache``; a check's
``fleet.once``), so the report stays one verdict per (check, node). Commands go through
the run's :class:`~nvtest.session.phase.PhaseRunner` (``ctx.phases``), so every command's evidence
lands under ``logs/<node>/<key>.log`` like any other probe's.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from nvtest.analysis.outliers import SYSTEMIC_MIN_NODES
from nvtest.config.inventory import Node
from nvtest.config.resources import probes_dir
from nvtest.config.thresholds import Assessment, SkuProfile, assess
from nvtest.errors import NodeError
from nvtest.session.context import FleetCache
from nvtest.session.facts import hardware_of
from nvtest.session.phase import hung_needs, unkillable_owners
from nvtest.transports.base import Command, CommandResult
from nvtest.verdict import Verdict

if TYPE_CHECKING:
    from nvtest.session.context import RunContext

__all__ = [
    "MULTI_NODE_CHECKS",
    "FleetCache",
    "address",
    "check_nodes",
    "known_bad",
    "launch_nodes",
    "fleet_cache",
    "assess_value",
    "judge_value",
    "pin_unkillable",
    "node_recipe",
    "probe_argv",
    "profile_of",
    "require_launched",
    "run_commands",
    "up_nodes",
]


def fleet_cache(ctx: RunContext) -> FleetCache:
    """The :class:`~nvtest.session.context.FleetCache` of this run: ``ctx.fleet_cache``. Kept
    for this round for callers not yet moved; a check asks the ``fleet`` fixture
    (``fleet.once(key, fn)``), library code ``ctx.fleet_cache``."""
    return ctx.fleet_cache


def check_nodes(ctx: RunContext, check: str) -> list[Node]:
    """The reachable nodes the check targets (its pytest items' nodes), in inventory order
    (computed once per check: see :meth:`~nvtest.session.context.RunContext.reachable_targets`)."""
    return ctx.reachable_targets(check)


#: The checks that launch one job (or a pair schedule) over several nodes: a node an earlier
#: check of the run failed, or on which something hung, is left out of them and named
#: (:func:`require_launched`). tests/jobs/test_known_bad.py walks every one.
MULTI_NODE_CHECKS = frozenset(
    {
        "nccl_multinode",
        "ib_write_bw",
        "tcp_bw",
        "mpi",
        "collectives_multinode",
        "train_multinode",
        "restart_injob",
        "container_identity",
        "nvlink_multinode",
    }
)


def _short(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def known_bad(ctx: RunContext, check: str) -> dict[str, str]:
    """node -> why it is left out of ``check``'s multi-node launch, for the check's reachable
    nodes (computed once per run and check, when its first item asks).

    A node is left out when a tool or device hung on it earlier in the run (a command ran past
    its deadline or left an unkillable process: ``<check> hung on this node (...)``), or
    when an item of an earlier check failed on it (``<check> failed on this node``): its fault
    would otherwise hang the launch or be copied onto every other node of it. A check that
    failed on every node of the launch, :data:`~nvtest.analysis.outliers.SYSTEMIC_MIN_NODES`
    or more, says nothing of one node against another (a systemic finding) and leaves no node
    out; a check with one node (mpi's ranks on one machine) leaves nothing out.
    """

    def compute() -> dict[str, str]:
        nodes = check_nodes(ctx, check)
        if len(nodes) < 2:  # a launch on one node (mpi's ranks there): nothing to copy onto
            return {}
        names = {n.name for n in nodes}
        failed_on: dict[str, set[str]] = {}
        for name in names:
            for c, verdict, _ in ctx.verdicts.get(name, ()):
                if verdict == Verdict.FAIL.value and c != check:
                    failed_on.setdefault(c, set()).add(name)
        systemic = {c for c, on in failed_on.items() if len(on) >= SYSTEMIC_MIN_NODES and on >= names}
        out: dict[str, str] = {}
        for n in nodes:
            hangs = ctx.phases.hangs(n.name)
            if hangs:
                h = hangs[0]
                out[n.name] = f"{h.key} hung on this node ({_short(h.error)})"
                continue
            fails = [
                (c, r)
                for c, v, r in ctx.verdicts.get(n.name, ())
                if v == Verdict.FAIL.value and c != check and c not in systemic
            ]
            if fails:
                c, r = fails[0]
                more = f"; {len(fails) - 1} more failed check(s)" if len(fails) > 1 else ""
                out[n.name] = f"{c} failed on this node ({_short(r)}){more}"
        return out

    return ctx.fleet_cache.get(f"known-bad:{check}", compute)


def launch_nodes(ctx: RunContext, check: str) -> list[Node]:
    """:func:`check_nodes` less the nodes :func:`known_bad` leaves out, in inventory order:
    the nodes a multi-node launch of ``check`` runs on."""
    bad = known_bad(ctx, check)
    return [n for n in check_nodes(ctx, check) if n.name not in bad]


def require_launched(
    ctx: RunContext,
    check: str,
    node: Node,
    note: Callable[[str, Any], None] | None = None,
    *,
    remaining: Sequence[Node] | None = None,
    minimum: int = 2,
) -> dict[str, str]:
    """The nodes left out of ``check``'s launch (node -> why), after making sure ``node`` takes
    part; ``note(key, value)`` (an item's ``judge.detail``) records them as ``left_out``.

    ``remaining``: the nodes the launch runs on (default :func:`launch_nodes`); ``minimum``:
    how many a launch needs.

    Raises:
        NodeError: ``node`` is left out (``left out of the multi-node launch: ib_ports failed
            on this node (...)``), or nodes were left out and fewer than ``minimum`` remain
            (never a pass nor a skip: the launch did not run, and the reason names why).
    """
    bad = known_bad(ctx, check)
    if note is not None and bad:
        note("left_out", dict(bad))
    if node.name in bad:
        raise NodeError(f"left out of the multi-node launch: {bad[node.name]}", cause="launch:left_out")
    left = list(remaining) if remaining is not None else launch_nodes(ctx, check)
    if bad and len(left) < minimum:
        others = "; ".join(f"{n}: {why}" for n, why in sorted(bad.items()))
        raise NodeError(
            f"too few nodes left for the multi-node launch: {len(left)} of "
            f"{len(left) + len(bad)} ({', '.join(n.name for n in left) or 'none'}); left out: {others}",
            cause="launch:too_few_nodes",
        )
    return bad


def require_up(ctx: RunContext, node: Node) -> None:
    """Raise the node's down error (:meth:`~nvtest.session.context.NodeState.down_error`:
    a :class:`~nvtest.errors.NodeError` worded by its cause) when it was down at the start."""
    state = ctx.states[node.name]
    if state.down_reason:
        raise state.down_error()


def address(ctx: RunContext, node: Node) -> str:
    """Where other nodes reach ``node``: its inventory address, else what the transport
    resolved its name to (ssh: the client config's HostName), else its name
    (:meth:`~nvtest.transports.base.Transport.node_address`)."""
    return ctx.transport.node_address(node)


def up_nodes(ctx: RunContext) -> list[Node]:
    """The run's nodes that were not down at the start, in inventory order."""
    return [n for n in ctx.nodes if not ctx.states[n.name].down_reason]


def profile_of(ctx: RunContext, node: Node) -> SkuProfile | None:
    """The node's SKU profile (None: none matched)."""
    match = ctx.states[node.name].match
    return match.profile if match else None


def node_recipe(ctx: RunContext, node: Node, key: str) -> dict[str, Any]:
    """The recipe section ``key`` of the node's SKU profile ({} when none)."""
    prof = profile_of(ctx, node)
    return dict((prof.recipe.get(key) if prof else None) or {})


def probe_argv(ctx: RunContext, node: Node, script: str, *args: str) -> list[str]:
    """``[python, <probe dir>/<script>, *args]`` for ``node``."""
    pdir = ctx.probe_dirs.get(node.name, str(probes_dir()))
    return [node.python, f"{pdir}/{script}", *args]


def run_commands(
    ctx: RunContext,
    key: str,
    nodes: Sequence[Node],
    commands: Mapping[str, Command],
    *,
    timeout_s: float,
    env: Mapping[str, str] | None = None,
    needs: Sequence[str] = (),
    touches: Sequence[str] | None = None,
    mark: bool = True,
) -> dict[str, CommandResult]:
    """Run ``commands[node]`` on every node at once through the phase runner (cached by
    ``key``, evidence written); ``timeout_s`` is scaled by ``--timeout-scale``; ``needs``:
    the tools and devices the commands need (a hang blocks, see
    :class:`~nvtest.session.phase.PhaseRunner`); ``touches`` (default ``needs``): what they
    touch, which words an unkillable result; ``mark`` False: a hang blocks nothing later
    (the caller pins it: a pair test)."""
    return ctx.phases.run(
        key,
        list(nodes),
        lambda n: commands[n.name],
        timeout_s=timeout_s * ctx.config.timeout_scale,
        env=dict(env) if env else None,
        needs=needs,
        touches=touches,
        mark=mark,
    )


def pin_unkillable(ctx: RunContext, key: str, res: CommandResult, needs: Sequence[str]) -> None:
    """Mark ``needs`` hung on each node that owns a process of a multi-node launch's result
    ``res`` that survived SIGKILL (:func:`~nvtest.session.phase.unkillable_owners`): later
    checks needing them are blocked there, later launches leave it out. A launch that only
    timed out marks no node: every node of a job waits for the slowest, and which one hung
    is for the pair re-run or the tool's words to say, not copied onto all of them."""
    for owner in unkillable_owners(res):  # stuck in the GPU's driver: every GPU need (hung_needs)
        ctx.phases.mark_hung(owner, key, hung_needs(res, needs), res.error or "unkillable")


def assess_value(ctx: RunContext, node: Node, check: str, metric: str, value: float | None, unit: str) -> Assessment:
    """``value`` judged as the Judge judges it (declared, plausible on the node's hardware,
    then the node's SKU threshold for (check, metric)), with its cause key."""
    prof = profile_of(ctx, node)
    hw = hardware_of(ctx.states[node.name].facts, prof, len(ctx.nodes) or 1)
    return assess(check, metric, value, unit, prof, hw)


def judge_value(
    ctx: RunContext, node: Node, check: str, metric: str, value: float | None, unit: str
) -> tuple[Verdict, str]:
    """:func:`assess_value`'s (verdict, reason)."""
    a = assess_value(ctx, node, check, metric, value, unit)
    return a.verdict, a.reason


def controller_env(name: str) -> str | None:
    """A setting from the controller's environment (``NVTEST_*``), None when unset or empty."""
    return os.environ.get(name) or None
