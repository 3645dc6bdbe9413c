"""The torch.distributed collectives checks (suites/interconnect/test_collectives.py).

- :func:`inside` (``collectives``): ``--nproc`` local ranks (one per GPU, NCCL; or gloo on
  CPU) run all_reduce, all_gather, reduce_scatter and alltoall over the recipe's sizes, where
  nccl-tests is not installed (where it is, the ``nccl`` check measures the node).
- :func:`across` (``collectives_multinode``): the same probe under torchrun on every node.

busbw uses nccl-tests' factors (``nvtest/probes/collective_probe.py``) and is judged at the
largest size as ``<op>_busbw_gbps`` (GB/s); any wrong element fails the item.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nvtest.checks.api import Fleet, Judge, Node, Probe, ProbeSkip, SkuProfile
from nvtest.jobs.base import node_recipe, require_launched, require_up
from nvtest.jobs.torchrun import node_share, run_torchrun
from nvtest.session.facts import NodeFacts

__all__ = ["COLLECTIVES", "across", "inside", "judge_collectives"]


def _common_args(recipe: dict[str, Any]) -> list[str]:
    args = [
        "--sizes",
        str(recipe.get("sizes", "1048576,67108864")),
        "--iters",
        str(recipe.get("iters", 5)),
    ]
    if recipe.get("ops"):
        args += ["--ops", ",".join(recipe["ops"])]
    return args


def _local_args(node: Node, sku: SkuProfile | None) -> list[str]:
    recipe = (sku.recipe.get("collectives") if sku else None) or {}
    gpus = sku.expect.gpus if sku and sku.expect.gpus else 0
    return ["--nproc", str(recipe.get("nproc", gpus or 2)), *_common_args(recipe)]


COLLECTIVES = Probe(
    "collectives", script="collective_probe.py", args=_local_args, timeout_s=900, needs=("gpu",), device="any"
)


def judge_collectives(judge: Judge, doc: dict[str, Any]) -> None:
    """Wrong elements fail; busbw of each operation at its largest size is judged."""
    results = doc.get("results") or []
    judge.detail("backend", doc.get("backend"))
    judge.detail("ranks", doc.get("ranks"))
    judge.detail("results", results)
    ops = sorted({r["op"] for r in results})
    for op in ops:
        rows = [r for r in results if r["op"] == op]
        skipped = [r for r in rows if r.get("skipped")]
        if skipped:
            judge.warn(f"{op} not measured: {skipped[0]['skipped']}")
            continue
        wrong = sum(int(r.get("wrong") or 0) for r in rows)
        if wrong:
            judge.fail(f"{op}: {wrong} wrong elements", "results:wrong")
        top = max(rows, key=lambda r: r["size_bytes"])
        judge(f"{op}_busbw_gbps", top.get("busbw_gbps"), "GB/s", size_bytes=top["size_bytes"])


def inside(node_facts: NodeFacts, measure: Callable[[Probe], dict[str, Any]], judge: Judge) -> None:
    """Check ``collectives``: :data:`COLLECTIVES` on the node (the ``measure`` fixture), judged.

    Raises:
        ProbeSkip: nccl-tests is installed on a GPU node (the ``nccl`` check measures it).
    """
    if node_facts.gpus and node_facts.tools.get("all_reduce_perf"):
        raise ProbeSkip("nccl-tests is installed: the nccl check measures this node's collectives")
    judge_collectives(judge, measure(COLLECTIVES))


def across(fleet: Fleet, node: Node, judge: Judge) -> None:
    """Check ``collectives_multinode``: the collective probe under torchrun over the check's
    nodes (once per run), judged on rank 0's document for this node's share.

    Raises:
        ProbeSkip: one node in the run.
        NodeError: the node was down, left out of the launch, or its ranks did not finish.
        ProbeError: the job's launcher or rank 0 failed (their words).
    """
    ctx = fleet.ctx
    require_up(ctx, node)
    if len(ctx.nodes) < 2:
        raise ProbeSkip("a multi-node collective needs two nodes; this run has one")
    require_launched(ctx, "collectives_multinode", node, judge.detail)
    recipe = node_recipe(ctx, ctx.nodes[0], "collectives_multinode")
    job = run_torchrun(
        ctx,
        "collectives_multinode",
        "collective_probe.py",
        _common_args(recipe),
        nproc_per_node=int(recipe.get("nproc_per_node", 1)),
        timeout_s=float(recipe.get("timeout_s", 900)),
    )
    judge.log = ctx.phases.log_path("collectives_multinode", node.name)
    judge.detail("rank_nodes", {str(r): n for r, n in sorted(job.rank_nodes.items())})
    judge_collectives(judge, node_share(job, node))
