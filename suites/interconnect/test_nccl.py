"""NCCL collectives with nccl-tests: inside each node, through the NICs only, and across nodes.

- ``nccl``: every operation of the recipe (``recipe.nccl.ops``; default all_reduce) over the
  node's GPUs, one rank per GPU (``-g <gpus>``), sizes up to ``max_bytes``.
- ``nccl_nics_only``: all_reduce with ``NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1``: traffic
  leaves through the NICs, separating NVLink faults from NIC faults.
- ``nccl_multinode``: one launch over all nodes (mpirun from the first node, or srun under
  Slurm), one rank per GPU; when it does not pass, the nodes are re-tested in pairs (ring)
  and the node common to the failing pairs is blamed (confirmed with a known-good node).

Verdicts (:mod:`nvtest.jobs.nccl`): busbw at the plateau, wrong results fail whatever
the bandwidth; a sweep the tool shortened below the threshold's point (its own "Reducing
maxBytes" line), validation switched off, or missing ranks is an error; NCCL WARN lines and
the error site are in the reason; what ran (sizes, validation, ranks, GPUs, dtype) is in the
details beside what was asked. Across nodes and through the NICs only, on a SKU with RDMA NICs
(``expect.ib_hcas``), the path NCCL says it took decides whatever the bandwidth: TCP sockets
(``Using network Socket``) or GPUDirect RDMA disabled on an HCA fails naming NCCL's line; no
line saying which network it used is an error. all_reduce inside a node and across nodes, on a
SKU with ``expect.nvls``: NCCL saying NVLink SHARP is not available, or failing to bind its
multicast memory, fails naming the line (``expect.collnet``: no CollNet across nodes fails). The GPUs a node must have come from its PCI bus and SKU:
nccl-tests missing there is an ``error``, never a skip. ``NCCL_DEBUG=INFO`` output goes to the evidence log. Binaries: the
recipe's ``tests_dir``, ``$NVTEST_NCCL_TESTS_DIR``, or the node's PATH.
"""

from __future__ import annotations

import os

import pytest

from nvtest.checks.api import Judge, ProbeSkip
from nvtest.checks.config.network import seen_interfaces
from nvtest.checks.hardware import expected_gpus, require
from nvtest.checks.interconnect.pair_check import pair_report, report_node
from nvtest.errors import ProbeError
from nvtest.jobs.base import (
    check_nodes,
    fleet_cache,
    launch_nodes,
    node_recipe,
    pin_unkillable,
    require_launched,
    run_commands,
)
from nvtest.jobs.launch import mpirun_argv
from nvtest.jobs.mpi import mpi_options, mpirun_preflight
from nvtest.jobs.nccl import NcclRecipe, NcclVerdict, judge_output, nccl_env, perf_argv
from nvtest.jobs.pair_jobs import NcclPairJob
from nvtest.session.facts import NodeFacts
from nvtest.session.phase import attribute_unkillable
from nvtest.session.probe import require_completed
from nvtest.transports.base import render_command

#: nccl-tests runs on the GPUs: a GPU that hung earlier on a node blocks it there at once
NCCL_NEEDS = ("gpu",)


def _recipe(ctx, node, key: str = "nccl") -> NcclRecipe:
    return NcclRecipe.from_recipe(
        node_recipe(ctx, node, key), tests_dir=os.environ.get("NVTEST_NCCL_TESTS_DIR")
    )


def _gpus(ctx, node) -> int:
    """The GPUs the node must have (PCI bus, SKU, nvidia-smi): one rank each."""
    st = ctx.states[node.name]
    if st.facts is None:
        return 0
    return expected_gpus(st.facts, st.match.profile if st.match else None).count


def _rdma_nics(ctx, node) -> int | None:
    """The RDMA NICs the node's SKU profile expects (``expect.ib_hcas``); None without a
    profile or without RDMA NICs. Where set, traffic that must cross the network is judged on
    the path NCCL took (:func:`nvtest.jobs.nccl.judge_run`, rule 4)."""
    st = ctx.states[node.name]
    profile = st.match.profile if st.match else None
    return profile.expect.ib_hcas if profile is not None and profile.expect else None


def _expects(ctx, node, key: str) -> bool:
    """The node's SKU profile ``expect.<key>`` (``nvls``, ``collnet``): NCCL's NVLS/CollNet
    lines are judged where True (:func:`nvtest.jobs.nccl.nvls_collnet_fails`)."""
    st = ctx.states[node.name]
    profile = st.match.profile if st.match else None
    return bool(profile is not None and profile.expect and getattr(profile.expect, key))


def _require_tool(node_facts: NodeFacts, recipe: NcclRecipe, op: str, ctx, node) -> None:
    st = ctx.states[node.name]
    exp = require(expected_gpus(node_facts, st.match.profile if st.match else None))
    binary = f"{op}_perf"
    if not recipe.tests_dir and not node_facts.tools.get("all_reduce_perf"):
        raise ProbeError(
            f"nccl-tests not installed: {binary} not on the node's PATH (set NVTEST_NCCL_TESTS_DIR);"
            f" nothing measured on the {exp.text()}"
        )


def _interfaces(judge: Judge, text: str, nodes) -> None:
    """Judge the interfaces NCCL said it used (its INFO lines) against the nodes' networks:
    a container/VM bridge or an address outside them fails (nvtest.checks.config.network)."""
    networks = sorted({net for n in nodes for net in n.networks})
    seen = seen_interfaces(text, networks)
    judge.detail("nccl_interfaces_seen", seen.details["nccl_interfaces_seen"])
    for f in seen.failures:
        judge.fail(f)
    for w in seen.warnings:
        judge.warn(w)


def _judge(judge: Judge, v: NcclVerdict, log: str | None) -> None:
    judge.detail(f"nccl_{v.op}", v.details())
    if v.status == "error":
        raise ProbeError(f"{v.op}: {v.reason}")
    if v.status == "fail":
        judge.fail(f"{v.op}: {v.reason}")
    judge(f"{v.op}_busbw_gbps", v.busbw_gbps, "GB/s", size_bytes=max(v.plateau_sizes, default=0))
    judge("wrong", v.wrong, "count", op=v.op)
    judge.log = log or judge.log


def _intra(node, node_facts, ctx, judge: Judge, *, nics_only: bool, check: str) -> None:
    recipe = _recipe(ctx, node)
    ops = ("all_reduce",) if nics_only else recipe.ops
    _require_tool(node_facts, recipe, ops[0], ctx, node)
    nodes = _gpu_nodes(ctx, check)
    envs = {n.name: nccl_env(_recipe(ctx, n), os.environ, nics_only=nics_only, nodes=[n]) for n in nodes}
    judge.detail("effective_env", envs.get(node.name, nccl_env(recipe, os.environ, nics_only=nics_only, nodes=[node])))
    for op in ops:
        key = f"{check}_{op}"
        cmds = {n.name: render_command(perf_argv(op, _recipe(ctx, n), _gpus(ctx, n)), envs[n.name]) for n in nodes}
        res = run_commands(ctx, key, nodes, cmds, timeout_s=1800, needs=NCCL_NEEDS)[node.name]
        require_completed(res)
        _interfaces(judge, res.stdout + "\n" + res.stderr, [node])
        v = judge_output(
            res.stdout + "\n" + res.stderr,
            op=op,
            max_bytes=recipe.max_bytes,
            plateau_bytes=recipe.plateau_bytes,
            expected_ranks=_gpus(ctx, node),
            rdma_nics=_rdma_nics(ctx, node) if nics_only else None,
            nvls=not nics_only and _expects(ctx, node, "nvls"),
        )
        _judge(judge, v, ctx.phases.log_path(key, node.name))


@pytest.mark.check("nccl", area="interconnect", title="NCCL collectives inside the node (busbw)")
def test_nccl(node, node_facts: NodeFacts, nvtest_context, judge: Judge) -> None:
    _intra(node, node_facts, nvtest_context, judge, nics_only=False, check="nccl")


@pytest.mark.check(
    "nccl_nics_only", area="interconnect", title="NCCL all_reduce through the NICs only"
)
def test_nccl_nics_only(node, node_facts: NodeFacts, nvtest_context, judge: Judge) -> None:
    _intra(node, node_facts, nvtest_context, judge, nics_only=True, check="nccl_nics_only")


def _gpu_nodes(ctx, check: str) -> list:
    """The check's reachable nodes with GPUs (computed once per run and check); for the
    multi-node launch, less the nodes an earlier check failed or hung on
    (:func:`~nvtest.jobs.base.known_bad`)."""
    select = launch_nodes if check == "nccl_multinode" else check_nodes
    return fleet_cache(ctx).get(f"{check}:gpu-nodes", lambda: [n for n in select(ctx, check) if _gpus(ctx, n)])


def _multinode(ctx, op: str) -> tuple[NcclVerdict, str, str | None, dict[str, str], str]:
    nodes = _gpu_nodes(ctx, "nccl_multinode")
    first = nodes[0]
    recipe = (
        _recipe(ctx, first, "nccl_multinode")
        if node_recipe(ctx, first, "nccl_multinode")
        else _recipe(ctx, first)
    )
    env = nccl_env(recipe, os.environ, nodes=nodes)
    prog = perf_argv(op, recipe, 1)
    expected = sum(_gpus(ctx, n) for n in nodes)
    launch = getattr(ctx.transport, "launch_multi", None)
    if launch is not None:  # Slurm: one srun step, one task per GPU
        res = launch(
            nodes, prog, _gpus(ctx, first), 1, env, timeout_s=1800 * ctx.config.timeout_scale
        )
        res = attribute_unkillable(res, NCCL_NEEDS)  # each survivor worded on its own node
        pin_unkillable(ctx, "nccl_multinode", res, NCCL_NEEDS)
        key = None
    else:
        key = f"nccl_multinode_{op}"
        unreachable = mpirun_preflight(ctx, key, nodes)
        if unreachable:  # mpirun would not start its daemons there: say so in seconds
            reasons = tuple(why for _, why in sorted(unreachable.items()))
            return NcclVerdict(op=op, status="fail", reasons=reasons), "", key, env, ""
        argv = mpirun_argv(
            [(n.name, _gpus(ctx, n)) for n in nodes],
            prog,
            export=list(env),
            opts=mpi_options(ctx, first),
        )
        # the launch's deadline is the job's: only a process that survived SIGKILL on the
        # first node is that node's own (the pair re-run pins the rest, not the launcher)
        res = run_commands(
            ctx, key, [first], {first.name: render_command(argv, env)}, timeout_s=1800,
            needs=NCCL_NEEDS, mark=False,
        )[first.name]  # fmt: skip
        pin_unkillable(ctx, key, res, NCCL_NEEDS)
    if not res.completed:
        return (
            NcclVerdict(op=op, status="error", reasons=(res.error or "did not complete",)),
            res.command,
            key,
            env,
            res.stdout + "\n" + res.stderr,
        )
    v = judge_output(
        res.stdout + "\n" + res.stderr,
        op=op,
        max_bytes=recipe.max_bytes,
        plateau_bytes=recipe.plateau_bytes,
        expected_ranks=expected,
        rdma_nics=_rdma_nics(ctx, first),
        nvls=_expects(ctx, first, "nvls"),
        collnet=_expects(ctx, first, "collnet"),
    )
    return v, res.command, key, env, res.stdout + "\n" + res.stderr


@pytest.mark.check(
    "nccl_multinode", area="interconnect", title="NCCL across nodes (busbw), pairs to localize"
)
def test_nccl_multinode(node, node_facts: NodeFacts, nvtest_context, judge: Judge) -> None:
    ctx = nvtest_context
    recipe = _recipe(ctx, node, "nccl_multinode")
    _require_tool(node_facts, recipe, "all_reduce", ctx, node)
    require_launched(ctx, "nccl_multinode", node, judge.detail, remaining=_gpu_nodes(ctx, "nccl_multinode"))
    if len(_gpu_nodes(ctx, "nccl_multinode")) < 2:
        raise ProbeSkip("multi-node NCCL needs two GPU nodes")
    op = recipe.ops[0]
    v, command, key, env, text = fleet_cache(ctx).get(f"nccl_multinode:{op}", lambda: _multinode(ctx, op))
    gpu_nodes = _gpu_nodes(ctx, "nccl_multinode")
    judge.detail("command", command)
    judge.detail("effective_env", env)
    if v.status == "pass":
        _judge(judge, v, ctx.phases.log_path(key, ctx.nodes[0].name) if key else None)
        if not judge.verdict.is_bad:
            _interfaces(judge, text, gpu_nodes)
            return
    judge.detail("all_nodes", v.details())
    job = NcclPairJob(
        ctx, check="nccl_multinode", op=op, recipe=recipe, gpus=lambda n: _gpus(ctx, n),
        env=nccl_env(recipe, os.environ, nodes=gpu_nodes), mpi=mpi_options(ctx, node),
        rdma_nics=lambda n: _rdma_nics(ctx, n), nvls=lambda n: _expects(ctx, n, "nvls"),
    )  # fmt: skip
    judge.metrics.clear()
    judge.failures.clear()
    report = pair_report(ctx, "nccl_multinode", job, gpu_nodes)
    report_node(judge, report, node, f"{op}_busbw_gbps", "GB/s")
    _interfaces(judge, text, gpu_nodes)
