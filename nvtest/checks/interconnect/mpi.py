"""The MPI check (suites/interconnect/test_mpi.py): one launch of ``mpi_probe.py`` over the
check's nodes (:func:`nvtest.jobs.mpi.run_mpi`: mpirun, or srun under Slurm), judged per node.

Metrics: ``barrier_latency_us`` (us, median over the barriers of the slowest rank's time) and
``allreduce_busbw_gbps`` (GB/s at the largest size, nccl-tests' busbw). A wrong element fails
every node; a rank placed elsewhere than the layout says fails its node; a world size other
than the ranks launched fails.
"""

from __future__ import annotations

from typing import Any

from nvtest.checks.api import Fleet, Judge, Node
from nvtest.config.recipes import MpiRecipe
from nvtest.jobs.base import launch_nodes, require_launched, require_up
from nvtest.jobs.mpi import node_share, run_mpi

__all__ = ["across"]


def _or(value: Any, default: Any) -> Any:
    """The recipe's value, else the check's own default (a key the profile does not set)."""
    return default if value is None else value


def _args(recipe: MpiRecipe) -> list[str]:
    args = ["--iters", str(_or(recipe.iters, 5)), "--barriers", str(_or(recipe.barriers, 200))]
    if recipe.sizes:
        args += ["--sizes", str(recipe.sizes)]
    return args


def across(fleet: Fleet, node: Node, judge: Judge) -> None:
    """Check ``mpi`` on ``node``: its share of the one MPI job over the check's nodes.

    Recipe ``recipe.mpi``: ``ranks_per_node`` (default 2 on one node, else 1), ``sizes``,
    ``iters``, ``barriers``, ``timeout_s`` (default 600 s).

    Raises:
        NodeError: the node was down, was left out of the launch (an earlier check failed or
            hung on it), or its ranks could not start.
        ProbeError: the job printed no result for it.
    """
    ctx = fleet.ctx
    require_up(ctx, node)
    nodes = launch_nodes(ctx, "mpi")
    left_out = require_launched(ctx, "mpi", node, judge.detail, remaining=nodes)
    recipe: MpiRecipe = fleet.recipe(nodes[0] if nodes else node, "mpi")
    k = int(_or(recipe.ranks_per_node, 2 if len(nodes) == 1 else 1))
    job = run_mpi(ctx, "mpi", _args(recipe), ranks_per_node=k, timeout_s=float(_or(recipe.timeout_s, 600)))
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
            "nodes": sorted({n for n in job.observed.values() if n is not None}),
            "sizes_bytes": [r.get("size_bytes") for r in doc.get("results") or []],
            "barriers": (doc.get("barrier") or {}).get("count"),
            "left_out": {**left_out, **job.excluded},
        },
    )
    for why in share.misplaced:
        judge.fail(why)
    if share.unidentified:  # one address, one host name for several nodes: not blame
        judge.detail(
            "placement",
            f"ranks {share.unidentified} not identifiable: their host name and address fit "
            "several nodes of the run, or none (nodes behind one address)",
        )
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
