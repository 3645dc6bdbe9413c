"""Multi-node NVLink (GB200 NVL72): the IMEX channel and domain, and the bandwidth across nodes.

- ``imex``: on a node whose SKU shares GPU memory across nodes (``expect.imex``), an IMEX
  channel device, the ``nvidia-imex`` service active, and ``nvidia-imex-ctl -N``: every node of
  the domain ``READY``, every connection ``C``, ``Domain State: UP``
  (:func:`nvtest.checks.interconnect.imex.imex_health`).
- ``nvlink_multinode``: nvbandwidth's ``multinode_device_to_device_memcpy_read_ce`` in one
  mpirun (one srun step under Slurm) over the run's nodes of such a SKU, one rank per GPU; per GPU the slowest read from
  any other GPU (``mn_read_ce_gbps``, GB/s) against the SKU's threshold. The tool's own
  failure (``CUDA_ERROR_NOT_PERMITTED``: no IMEX channel) fails the node it names, in its words.
"""

from __future__ import annotations

import os

import pytest

from nvtest.checks.api import Judge, Probe, ProbeSkip
from nvtest.checks.hardware import expected_gpus, require
from nvtest.checks.health import apply
from nvtest.checks.health.nvlink import split_sections
from nvtest.checks.interconnect.imex import (
    IMEX_SCRIPT,
    MN_READ_CASE,
    imex_health,
    multinode_bandwidth,
)
from nvtest.config.thresholds import SkuProfile
from nvtest.errors import ProbeError
from nvtest.jobs.base import check_nodes, fleet_cache, run_commands
from nvtest.jobs.launch import mpirun_argv
from nvtest.jobs.mpi import mpi_options, node_for_token
from nvtest.session.facts import NodeFacts
from nvtest.transports.base import render_command

IMEX = Probe("imex", command=("sh", "-c", IMEX_SCRIPT), timeout_s=60, needs=("gpu",))


def _imex_sku(sku: SkuProfile | None) -> None:
    if not (sku and sku.expect.imex):
        raise ProbeSkip(
            f"{'SKU ' + sku.name if sku else 'no SKU profile'}: does not share GPU memory across nodes "
            "(expect.imex): no IMEX domain, no multi-node NVLink"
        )


@pytest.mark.check("imex", area="interconnect", title="IMEX channel, service and domain (multi-node NVLink)")
def test_imex(node, judge: Judge, node_facts: NodeFacts, raw, sku: SkuProfile | None) -> None:
    """An IMEX channel device, nvidia-imex active, every domain node READY and connected."""
    _imex_sku(sku)
    require(expected_gpus(node_facts, sku))
    res = raw(IMEX)
    apply(imex_health(split_sections(res.stdout)), judge)


def _gpus(ctx, node) -> int:
    st = ctx.states[node.name]
    if st.facts is None:
        return 0
    return expected_gpus(st.facts, st.match.profile if st.match else None).count


def _mn_run(ctx, nodes) -> dict:
    """One mpirun of nvbandwidth's multi-node read over ``nodes`` (one rank per GPU)."""
    first = nodes[0]
    layout = [(n.name, _gpus(ctx, n)) for n in nodes]
    prog = [os.environ.get("NVTEST_NVBANDWIDTH", "nvbandwidth"), "-t", MN_READ_CASE]
    launch = getattr(ctx.transport, "launch_multi", None)
    key: str | None = "nvlink_multinode"
    if launch is not None:  # Slurm: one srun step, one task per GPU
        res = launch(nodes, prog, _gpus(ctx, first), 1, {}, timeout_s=900 * ctx.config.timeout_scale)
        key = None
    else:
        argv = mpirun_argv(layout, prog, opts=mpi_options(ctx, first))
        res = run_commands(ctx, "nvlink_multinode", [first], {first.name: render_command(argv, {})},
                           timeout_s=900, needs=("gpu",))[first.name]  # fmt: skip
    text = res.stdout + "\n" + res.stderr
    hosts = {}
    for n in nodes:
        for token in (n.name, ctx.transport.node_address(n)):
            if token and node_for_token(token, nodes) == n.name:
                hosts[token] = n.name
    if not res.completed:
        return {"shares": None, "why": res.error or "did not complete", "command": res.command, "key": key}
    return {"shares": multinode_bandwidth(text, layout, hosts), "command": res.command, "key": key,
            "exit": res.exit_code}  # fmt: skip


@pytest.mark.check("nvlink_multinode", area="interconnect", title="NVLink bandwidth across nodes (nvbandwidth multinode)")
def test_nvlink_multinode(node, judge: Judge, node_facts: NodeFacts, nvtest_context, sku: SkuProfile | None) -> None:
    """The slowest multi-node NVLink read per GPU against ``nvlink_multinode.mn_read_ce_gbps``."""
    ctx = nvtest_context
    _imex_sku(sku)
    exp = require(expected_gpus(node_facts, sku))
    if not node_facts.tools.get("nvbandwidth") and not os.environ.get("NVTEST_NVBANDWIDTH"):
        raise ProbeError(f"nvbandwidth not found on the node's PATH: nothing measured on the {exp.text()}", cause="tool:missing")
    nodes = [n for n in check_nodes(ctx, "nvlink_multinode") if _gpus(ctx, n)]
    if len(nodes) < 2:
        raise ProbeSkip("multi-node NVLink needs two nodes of the NVLink domain in the run")
    run = fleet_cache(ctx).get("nvlink_multinode:run", lambda: _mn_run(ctx, nodes))
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
