"""The multi-node NVLink checks (suites/interconnect/test_imex.py; GB200 NVL72), on a node whose
SKU shares GPU memory across nodes (``expect.imex``); the judging is
:mod:`nvtest.checks.interconnect.imex`'s.

- :func:`imex` (``imex``): an IMEX channel device, the ``nvidia-imex`` service active, and
  ``nvidia-imex-ctl -N``: every node of the domain ``READY``, every connection ``C``,
  ``Domain State: UP``.
- :func:`bandwidth` (``nvlink_multinode``): nvbandwidth's
  ``multinode_device_to_device_memcpy_read_ce`` in one launch over the run's nodes of such a
  SKU (the transport's own multi-node launcher, srun under Slurm; else mpirun), one rank per
  GPU; per GPU the slowest read from any other GPU (``mn_read_ce_gbps``, GB/s). A node an
  earlier check of the run failed or hung on is left out of the launch and named
  (:func:`~nvtest.jobs.base.launch_nodes`, :func:`~nvtest.jobs.base.require_launched`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from nvtest.checks.api import Fleet, Judge, Node, Probe, ProbeSkip, SkuProfile
from nvtest.checks.hardware import expected_gpus, require
from nvtest.checks.health import apply
from nvtest.checks.health.nvlink import split_sections
from nvtest.checks.interconnect.imex import (
    IMEX_SCRIPT,
    MN_READ_CASE,
    imex_health,
    multinode_bandwidth,
)
from nvtest.checks.interconnect.nodes import gpus
from nvtest.errors import ProbeError
from nvtest.jobs.base import launch_nodes, pin_unkillable, require_launched, run_commands
from nvtest.jobs.launch import mpirun_argv
from nvtest.jobs.mpi import mpi_options, node_for_token
from nvtest.session.facts import NodeFacts
from nvtest.session.phase import attribute_unkillable
from nvtest.transports.base import CommandResult, render_command

__all__ = ["IMEX", "bandwidth", "imex"]

IMEX = Probe("imex", command=("sh", "-c", IMEX_SCRIPT), timeout_s=60, needs=("gpu",))


def _imex_sku(sku: SkuProfile | None) -> None:
    if not (sku and sku.expect.imex):
        raise ProbeSkip(
            f"{'SKU ' + sku.name if sku else 'no SKU profile'}: does not share GPU memory across nodes "
            "(expect.imex): no IMEX domain, no multi-node NVLink"
        )


def imex(node_facts: NodeFacts, raw: Callable[[Probe], CommandResult], sku: SkuProfile | None, judge: Judge) -> None:
    """Check ``imex``: an IMEX channel device, nvidia-imex active, every domain node READY and
    connected (:func:`~nvtest.checks.interconnect.imex.imex_health`).

    Raises:
        ProbeSkip: the SKU does not share GPU memory across nodes, or the node has no GPU.
    """
    _imex_sku(sku)
    require(expected_gpus(node_facts, sku))
    res = raw(IMEX)
    apply(imex_health(split_sections(res.stdout)), judge)


def _mn_run(fleet: Fleet, nodes: list[Node]) -> dict[str, Any]:
    """One launch of nvbandwidth's multi-node read over ``nodes`` (one rank per GPU)."""
    ctx = fleet.ctx
    first = nodes[0]
    layout = [(n.name, gpus(ctx, n)) for n in nodes]
    prog = [os.environ.get("NVTEST_NVBANDWIDTH", "nvbandwidth"), "-t", MN_READ_CASE]
    multi = ctx.transport.multi_launcher()
    key: str | None = "nvlink_multinode"
    if multi is not None:  # the transport's own launcher (srun): one step, one task per GPU
        res = multi.launch(nodes, prog, gpus(ctx, first), 1, {}, timeout_s=900 * ctx.config.timeout_scale)
        res = attribute_unkillable(res, ("gpu",))  # each survivor worded on its own node
        key = None
    else:  # the launch's deadline is the job's, not the first node's (as nccl_multinode's)
        argv = mpirun_argv(layout, prog, opts=mpi_options(ctx, first))
        res = run_commands(
            ctx,
            "nvlink_multinode",
            [first],
            {first.name: render_command(argv, {})},
            timeout_s=900,
            needs=("gpu",),
            mark=False,
        )[first.name]
    pin_unkillable(ctx, "nvlink_multinode", res, ("gpu",))  # only a survivor's own node is marked
    text = res.stdout + "\n" + res.stderr
    hosts = {}
    for n in nodes:
        for token in (n.name, ctx.transport.node_address(n)):
            if token and node_for_token(token, nodes) == n.name:
                hosts[token] = n.name
    if not res.completed:
        return {"shares": None, "why": res.error or "did not complete", "command": res.command, "key": key}
    return {
        "shares": multinode_bandwidth(text, layout, hosts),
        "command": res.command,
        "key": key,
        "exit": res.exit_code,
    }


def bandwidth(fleet: Fleet, node: Node, node_facts: NodeFacts, sku: SkuProfile | None, judge: Judge) -> None:
    """Check ``nvlink_multinode``: the slowest multi-node NVLink read per GPU of ``node``
    against ``nvlink_multinode.mn_read_ce_gbps``.

    Raises:
        NodeError: the node is left out of the launch (an earlier check failed or hung on it),
            or nodes were left out and fewer than two remain.
        ProbeSkip: the SKU does not share GPU memory across nodes, or fewer than two such nodes.
        ProbeError: nvbandwidth missing where the node's GPUs are expected, the launch did not
            complete, or this node's GPUs were not measured (the tool's words).
    """
    ctx = fleet.ctx
    _imex_sku(sku)
    exp = require(expected_gpus(node_facts, sku))
    if not node_facts.tools.get("nvbandwidth") and not os.environ.get("NVTEST_NVBANDWIDTH"):
        raise ProbeError(
            f"nvbandwidth not found on the node's PATH: nothing measured on the {exp.text()}", cause="tool:missing"
        )
    nodes = fleet.once(
        "nvlink_multinode:nodes", lambda: [n for n in launch_nodes(ctx, "nvlink_multinode") if gpus(ctx, n)]
    )
    require_launched(ctx, "nvlink_multinode", node, judge.detail, remaining=nodes)
    if len(nodes) < 2:
        raise ProbeSkip("multi-node NVLink needs two nodes of the NVLink domain in the run")
    run = fleet.once("nvlink_multinode:run", lambda: _mn_run(fleet, nodes))
    judge.detail("command", run["command"])
    judge.log = ctx.phases.log_path(run["key"], nodes[0].name) if run["key"] else judge.log
    if run["shares"] is None:
        raise ProbeError(f"nvbandwidth multinode over {len(nodes)} nodes: {run['why']}")
    share = run["shares"].get(node.name)
    if share is None:
        raise ProbeError(f"{node.name} was not part of the multi-node run")
    if share.failed:
        judge.fail(share.failed)
        return
    if share.unmeasured:
        raise ProbeError(share.unmeasured)
    for local, value in share.values:
        judge("mn_read_ce_gbps", value, "GB/s", device=f"cuda:{local}", stat="min over peers")
