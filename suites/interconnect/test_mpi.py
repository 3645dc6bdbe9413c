"""MPI across all nodes: one launch (mpirun, or srun under Slurm) of ``mpi_probe.py``.

Every rank reports where it runs; rank 0 measures barrier latency and an allreduce of
float64 buffers (sizes of ``recipe.mpi.sizes``, default 1 KiB, 1 MiB, 64 MiB) and checks
each result exactly. One item per node:

- ``barrier_latency_us`` (us): median over the barriers of the slowest rank's time;
- ``allreduce_busbw_gbps`` (GB/s): busbw at the largest size, ``algbw * 2 (n - 1) / n``
  as nccl-tests defines it (doc/PERFORMANCE.md);
- a wrong element fails every node (the job's result is wrong, not one node's);
- a node an earlier check of the run failed, or on which something hung, is left out of
  the launch and its item is an error naming that check (``left out of the multi-node
  launch: ib_ports failed on this node``); the others are judged on their own;
- a node whose ranks could not start (mpirun, ssh or srun naming it) fails; the job is
  launched again without it (when two or more nodes are left) and the other nodes are
  judged on that run (``left_out`` in their details names the node); with fewer nodes
  left, their items are errors naming it. A rank that ran elsewhere than the layout says
  fails its node.

On one node (``local``): ``ranks_per_node`` ranks (default 2) on that node. Recipe keys
(``recipe.mpi``): ``ranks_per_node`` (default: 2 on one node, else 1), ``sizes``, ``iters``,
``barriers``, ``timeout_s``, and the launcher's ``rsh_agent``, ``tcp_if_include``, ``mca``.
"""

from __future__ import annotations

import pytest

from nvtest.checks.api import Judge
from nvtest.jobs.base import launch_nodes, node_recipe, require_launched, require_up
from nvtest.jobs.mpi import node_share, run_mpi


def _args(recipe: dict) -> list[str]:
    args = ["--iters", str(recipe.get("iters", 5)), "--barriers", str(recipe.get("barriers", 200))]
    if recipe.get("sizes"):
        args += ["--sizes", str(recipe["sizes"])]
    return args


@pytest.mark.check("mpi", area="interconnect", title="MPI across all nodes (barrier, allreduce)")
def test_mpi(node, nvtest_context, judge: Judge) -> None:
    ctx = nvtest_context
    require_up(ctx, node)
    nodes = launch_nodes(ctx, "mpi")
    left_out = require_launched(ctx, "mpi", node, judge.detail, remaining=nodes)
    recipe = node_recipe(ctx, nodes[0] if nodes else node, "mpi")
    k = int(recipe.get("ranks_per_node", 2 if len(nodes) == 1 else 1))
    job = run_mpi(
        ctx, "mpi", _args(recipe), ranks_per_node=k, timeout_s=float(recipe.get("timeout_s", 600))
    )
    shown = job.first if job.first and node.name in job.excluded else job
    judge.log = ctx.phases.log_path(shown.key, shown.log_node) if shown.log_node else None
    if job.excluded or left_out:
        judge.detail("left_out", {**left_out, **job.excluded})
    judge.detail("launcher", job.launcher)
    judge.detail("command", job.result.command)
    judge.detail("rank_nodes", {str(r): n for r, n in sorted(job.observed.items())})
    share = node_share(job, node)
    doc = share.doc
    judge.detail("node_ranks", share.ranks)
    judge.detail("world_size", doc.get("world_size"))
    judge.detail("mpi_library", doc.get("mpi_library"))
    judge.detail("barrier", doc.get("barrier"))
    judge.detail("results", doc.get("results"))
    judge.detail(
        "effective",
        {
            "launcher": job.launcher,
            "world_size": doc.get("world_size"),
            "ranks_per_node": k,
            "nodes": sorted(set(job.observed.values())),
            "sizes_bytes": [r.get("size_bytes") for r in doc.get("results") or []],
            "barriers": (doc.get("barrier") or {}).get("count"),
            "left_out": {**left_out, **job.excluded},
        },
    )
    for why in share.misplaced:
        judge.fail(why)
    if doc.get("world_size") != len(job.expected):
        judge.fail(f"world size {doc.get('world_size')}, {len(job.expected)} ranks launched")
    results = doc.get("results") or []
    wrong = sum(int(r.get("wrong") or 0) for r in results)
    if wrong:
        judge.fail(f"allreduce: {wrong} wrong elements (float64, exact check)")
    judge("barrier_latency_us", (doc.get("barrier") or {}).get("median_us"), "us")
    if results:
        top = max(results, key=lambda r: r["size_bytes"])
        judge("allreduce_busbw_gbps", top.get("busbw_gbps"), "GB/s", size_bytes=top["size_bytes"])
