"""Collectives with torch.distributed: the fallback when nccl-tests is absent, and across nodes.

- ``collectives``: inside each node, ``--nproc`` local ranks (one per GPU, NCCL; or gloo on
  CPU) run all_reduce, all_gather, reduce_scatter and alltoall over the recipe's sizes. Runs
  where nccl-tests is not installed (where it is, the ``nccl`` check measures the node).
- ``collectives_multinode``: the same probe under torchrun on every node at once.

busbw uses nccl-tests' factors (see ``nvtest/probes/collective_probe.py``) and is judged at
the largest size as ``<op>_busbw_gbps``; any wrong element fails the item whatever the
bandwidth.
"""

from __future__ import annotations

import pytest

from nvtest.checks.api import Judge, Probe, ProbeSkip
from nvtest.config.inventory import Node
from nvtest.config.thresholds import SkuProfile
from nvtest.jobs.base import node_recipe, require_launched, require_up
from nvtest.jobs.torchrun import node_share, run_torchrun
from nvtest.session.facts import NodeFacts


def _common_args(recipe: dict) -> list[str]:
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


def judge_collectives(judge: Judge, doc: dict) -> None:
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
            judge.fail(f"{op}: {wrong} wrong elements")
        top = max(rows, key=lambda r: r["size_bytes"])
        judge(f"{op}_busbw_gbps", top.get("busbw_gbps"), "GB/s", size_bytes=top["size_bytes"])


@pytest.mark.check(
    "collectives", area="interconnect", title="Collectives inside the node (torch.distributed)"
)
def test_collectives(node, node_facts: NodeFacts, measure, judge: Judge) -> None:
    if node_facts.gpus and node_facts.tools.get("all_reduce_perf"):
        raise ProbeSkip("nccl-tests is installed: the nccl check measures this node's collectives")
    judge_collectives(judge, measure(COLLECTIVES))


@pytest.mark.check(
    "collectives_multinode", area="interconnect", title="Collectives across all nodes (torchrun)"
)
def test_collectives_multinode(node, nvtest_context, judge: Judge) -> None:
    ctx = nvtest_context
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
