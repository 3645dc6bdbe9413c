"""The NCCL checks (suites/interconnect/test_nccl.py): nccl-tests inside a node and across nodes.

- :func:`intra`: every operation of the node's recipe (``recipe.nccl.ops``; default
  all_reduce) over the node's GPUs, one rank per GPU (``-g <gpus>``); with ``nics_only``,
  all_reduce with ``NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1`` (traffic through the NICs).
- :func:`multinode`: one launch over the check's nodes (the transport's own multi-node
  launcher, srun under Slurm; else mpirun from the first node), one rank per GPU; when it does
  not pass, the nodes are re-tested in pairs and the node common to the failing pairs blamed.

Verdicts are :func:`nvtest.jobs.nccl.judge_output`'s (one :class:`~nvtest.verdict.Outcome`
per run): an error is the item's ``error``, failures fail it, the plateau busbw
(``<op>_busbw_gbps``, GB/s) and ``wrong`` (count) are judged against the SKU.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from nvtest.checks.api import Fleet, Judge, ProbeSkip
from nvtest.checks.config.network import seen_interfaces
from nvtest.checks.hardware import expected_gpus, require
from nvtest.checks.interconnect.nodes import expects, gpus, profile, rdma_nics
from nvtest.checks.interconnect.pair_check import pair_report, report_node
from nvtest.config.inventory import Node
from nvtest.errors import ProbeError
from nvtest.jobs.base import (
    check_nodes,
    launch_nodes,
    node_recipe,
    pin_unkillable,
    require_launched,
    run_commands,
)
from nvtest.jobs.launch import mpirun_argv
from nvtest.jobs.mpi import mpi_options, mpirun_preflight
from nvtest.jobs.nccl import NcclRecipe, judge_output, nccl_env, nccl_outcome, nvls_switched_off, perf_argv
from nvtest.jobs.pair_jobs import NcclPairJob
from nvtest.session.facts import NodeFacts
from nvtest.session.phase import attribute_unkillable
from nvtest.session.probe import require_completed
from nvtest.transports.base import render_command
from nvtest.verdict import Outcome, Verdict

__all__ = ["NCCL_NEEDS", "MultinodeRun", "intra", "multinode"]

#: nccl-tests runs on the GPUs: a GPU that hung earlier on a node blocks it there at once
NCCL_NEEDS = ("gpu",)
#: the multi-node check's name (its items, its evidence, its pair schedule)
MULTINODE = "nccl_multinode"


def _recipe(fleet: Fleet, node: Node, key: str = "nccl") -> NcclRecipe:
    return NcclRecipe.from_recipe(node_recipe(fleet.ctx, node, key), tests_dir=os.environ.get("NVTEST_NCCL_TESTS_DIR"))


def _require_tool(fleet: Fleet, node: Node, node_facts: NodeFacts, recipe: NcclRecipe, op: str) -> None:
    """The node's GPUs (PCI bus, SKU) are expected: nccl-tests missing there is an error."""
    exp = require(expected_gpus(node_facts, profile(fleet.ctx, node)))
    binary = f"{op}_perf"
    if not recipe.tests_dir and not node_facts.tools.get("all_reduce_perf"):
        raise ProbeError(
            f"nccl-tests not installed: {binary} not on the node's PATH (set NVTEST_NCCL_TESTS_DIR);"
            f" nothing measured on the {exp.text()}"
        )


def _interfaces(judge: Judge, text: str, nodes: list[Node]) -> None:
    """Judge the interfaces NCCL said it used (its INFO lines) against the nodes' networks:
    a container/VM bridge or an address outside them fails (nvtest.checks.config.network)."""
    networks = sorted({net for n in nodes for net in n.networks})
    seen = seen_interfaces(text, networks)
    judge.detail("nccl_interfaces_seen", seen.details["nccl_interfaces_seen"])
    for f in seen.failures:
        judge.fail(f)
    for w in seen.warnings:
        judge.warn(w)


def _nvls_recipe(judge: Judge, env: dict[str, str], recipe: NcclRecipe, where: str) -> None:
    """On a SKU that expects NVLink SHARP, a recipe (or environment) setting that switches it
    off warns, naming the setting: the run's figure is then not the path the SKU promises."""
    line = nvls_switched_off(env, recipe, where)
    if line is not None:
        judge.warn(
            f"NVLS switched off by {line}: the SKU expects NVLink SHARP (expect.nvls), so all_reduce did not measure it"
        )


def _record(judge: Judge, v: Outcome, log: str | None) -> None:
    """Record one run's outcome: its details under ``nccl_<op>``, then an error (raised),
    its failures (one line, prefixed with the operation), its metrics."""
    op = v.details["op"]
    judge.detail(f"nccl_{op}", v.details)
    if v.verdict == Verdict.ERROR:
        raise ProbeError(f"{op}: {v.error}", cause=v.cause)
    if v.verdict == Verdict.FAIL:
        judge.fail(f"{op}: {v.text()}", v.cause)
    for m in v.metrics:
        judge(m.name, m.value, m.unit, **m.labels)
    judge.log = log or judge.log


def _gpu_nodes(fleet: Fleet, check: str) -> list[Node]:
    """The check's reachable nodes with GPUs (computed once per run and check); for the
    multi-node launch, less the nodes an earlier check failed or hung on
    (:func:`~nvtest.jobs.base.known_bad`)."""
    ctx = fleet.ctx
    select = launch_nodes if check == MULTINODE else check_nodes
    return fleet.once(f"{check}:gpu-nodes", lambda: [n for n in select(ctx, check) if gpus(ctx, n)])


def intra(fleet: Fleet, node: Node, node_facts: NodeFacts, judge: Judge, *, nics_only: bool = False) -> None:
    """Check ``nccl`` (or ``nccl_nics_only``) on ``node``: each operation of its recipe run on
    every GPU node of the check at once, this node's run judged.

    Raises:
        ProbeError: nccl-tests missing where the node's GPUs are expected, or a run that is
            an error (no table, too few ranks, validation off, the sweep cut short).
        ProbeSkip: no GPU expected on the node (the bus's words).
    """
    ctx = fleet.ctx
    check = "nccl_nics_only" if nics_only else "nccl"
    recipe = _recipe(fleet, node)
    ops = ("all_reduce",) if nics_only else recipe.ops
    _require_tool(fleet, node, node_facts, recipe, ops[0])
    nodes = _gpu_nodes(fleet, check)
    envs = {n.name: nccl_env(_recipe(fleet, n), os.environ, nics_only=nics_only, nodes=[n]) for n in nodes}
    judge.detail("effective_env", envs.get(node.name, nccl_env(recipe, os.environ, nics_only=nics_only, nodes=[node])))
    if not nics_only and "all_reduce" in ops and expects(ctx, node, "nvls"):
        _nvls_recipe(judge, envs.get(node.name) or nccl_env(recipe, os.environ, nodes=[node]), recipe, "recipe.nccl")
    for op in ops:
        key = f"{check}_{op}"
        cmds = {n.name: render_command(perf_argv(op, _recipe(fleet, n), gpus(ctx, n)), envs[n.name]) for n in nodes}
        res = run_commands(ctx, key, nodes, cmds, timeout_s=1800, needs=NCCL_NEEDS)[node.name]
        require_completed(res)
        _interfaces(judge, res.stdout + "\n" + res.stderr, [node])
        v = judge_output(
            res.stdout + "\n" + res.stderr,
            op=op,
            max_bytes=recipe.max_bytes,
            plateau_bytes=recipe.plateau_bytes,
            expected_ranks=gpus(ctx, node),
            rdma_nics=rdma_nics(ctx, node) if nics_only else None,
            nvls=not nics_only and expects(ctx, node, "nvls"),
        )
        _record(judge, v, ctx.phases.log_path(key, node.name))


@dataclass(frozen=True)
class MultinodeRun:
    """The one launch of the multi-node check: its outcome, the command line, the evidence key
    (None: the launcher's own step, no per-node log), the environment and the tool's text."""

    outcome: Outcome
    command: str
    key: str | None
    env: dict[str, str]
    text: str


def _launch(fleet: Fleet, op: str) -> MultinodeRun:
    """One launch of ``op`` over the check's GPU nodes, judged as a whole."""
    ctx = fleet.ctx
    nodes = _gpu_nodes(fleet, MULTINODE)
    first = nodes[0]
    recipe = _recipe(fleet, first, MULTINODE) if node_recipe(ctx, first, MULTINODE) else _recipe(fleet, first)
    env = nccl_env(recipe, os.environ, nodes=nodes)
    prog = perf_argv(op, recipe, 1)
    expected = sum(gpus(ctx, n) for n in nodes)
    multi = ctx.transport.multi_launcher()
    key: str | None
    if multi is not None:  # the transport's own launcher (srun): one step, one task per GPU
        res = multi.launch(nodes, prog, gpus(ctx, first), 1, env, timeout_s=1800 * ctx.config.timeout_scale)
        res = attribute_unkillable(res, NCCL_NEEDS)  # each survivor worded on its own node
        pin_unkillable(ctx, MULTINODE, res, NCCL_NEEDS)
        key = None
    else:
        key = f"{MULTINODE}_{op}"
        unreachable = mpirun_preflight(ctx, key, nodes)
        if unreachable:  # mpirun would not start its daemons there: say so in seconds
            reasons = tuple(why for _, why in sorted(unreachable.items()))
            return MultinodeRun(nccl_outcome(op, "fail", reasons=reasons), "", key, env, "")
        argv = mpirun_argv(
            [(n.name, gpus(ctx, n)) for n in nodes], prog, export=list(env), opts=mpi_options(ctx, first)
        )
        # the launch's deadline is the job's: only a process that survived SIGKILL on the
        # first node is that node's own (the pair re-run pins the rest, not the launcher)
        res = run_commands(
            ctx,
            key,
            [first],
            {first.name: render_command(argv, env)},
            timeout_s=1800,
            needs=NCCL_NEEDS,
            mark=False,
        )[first.name]
        pin_unkillable(ctx, key, res, NCCL_NEEDS)
    text = res.stdout + "\n" + res.stderr
    if not res.completed:
        return MultinodeRun(
            nccl_outcome(op, "error", reasons=(res.error or "did not complete",)), res.command, key, env, text
        )
    v = judge_output(
        text,
        op=op,
        max_bytes=recipe.max_bytes,
        plateau_bytes=recipe.plateau_bytes,
        expected_ranks=expected,
        rdma_nics=rdma_nics(ctx, first),
        nvls=expects(ctx, first, "nvls"),
        collnet=expects(ctx, first, "collnet"),
    )
    return MultinodeRun(v, res.command, key, env, text)


def multinode(fleet: Fleet, node: Node, node_facts: NodeFacts, judge: Judge) -> None:
    """Check ``nccl_multinode`` on ``node``: the first operation of ``recipe.nccl_multinode``
    in one launch over the check's GPU nodes (once per run); when it does not pass, the
    nodes re-tested in pairs (:func:`~nvtest.checks.interconnect.pair_check.pair_report`)
    and this node judged on its pairs.

    Raises:
        NodeError: the node is left out of the launch (an earlier check failed or hung on it).
        ProbeSkip: fewer than two GPU nodes in the run.
        ProbeError: nccl-tests missing where the node's GPUs are expected, or the run an error.
    """
    ctx = fleet.ctx
    recipe = _recipe(fleet, node, MULTINODE)
    _require_tool(fleet, node, node_facts, recipe, "all_reduce")
    gpu_nodes = _gpu_nodes(fleet, MULTINODE)
    require_launched(ctx, MULTINODE, node, judge.detail, remaining=gpu_nodes)
    if len(gpu_nodes) < 2:
        raise ProbeSkip("multi-node NCCL needs two GPU nodes")
    op = recipe.ops[0]
    run = fleet.once(f"{MULTINODE}:{op}", lambda: _launch(fleet, op))
    judge.detail("command", run.command)
    judge.detail("effective_env", run.env)
    own = bool(node_recipe(ctx, node, MULTINODE))  # the launch's recipe (_launch): its own, else recipe.nccl
    where, launched = ("recipe.nccl_multinode", recipe) if own else ("recipe.nccl", _recipe(fleet, node))
    nvls_off = op == "all_reduce" and expects(ctx, node, "nvls")
    if run.outcome.verdict == Verdict.PASS:
        _record(judge, run.outcome, ctx.phases.log_path(run.key, ctx.nodes[0].name) if run.key else None)
        if not judge.verdict.is_bad:
            _interfaces(judge, run.text, gpu_nodes)
            if nvls_off:
                _nvls_recipe(judge, run.env, launched, where)
            return
    judge.detail("all_nodes", run.outcome.details)
    job = NcclPairJob(
        ctx,
        check=MULTINODE,
        op=op,
        recipe=recipe,
        gpus=lambda n: gpus(ctx, n),
        env=nccl_env(recipe, os.environ, nodes=gpu_nodes),
        mpi=mpi_options(ctx, node),
        rdma_nics=lambda n: rdma_nics(ctx, n),
        nvls=lambda n: expects(ctx, n, "nvls"),
    )
    judge.restart(f"the launch over {len(gpu_nodes)} nodes did not pass: judged on this node's pairs")
    report = pair_report(ctx, MULTINODE, job, gpu_nodes)
    report_node(judge, report, node, f"{op}_busbw_gbps", "GB/s")
    _interfaces(judge, run.text, gpu_nodes)
    if nvls_off:
        _nvls_recipe(judge, run.env, launched, where)
