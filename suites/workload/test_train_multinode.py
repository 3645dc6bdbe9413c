"""Training smoke run across all nodes: torchrun on every node, DDP on a tiny transformer.

Rendezvous on the first node (a free port there); NCCL on GPUs, gloo on CPU. Passes when the
loss falls (last 5 steps below 90 % of the first 5), no loss is NaN, and every node's ranks
finish within the timeout. Metrics: step time (median, s) and tokens/s of the whole job; the
rank -> node map is in the item's details. One item per node: a node whose ranks failed or
hung is named in its own item; a node an earlier check failed, or on which something hung, is
left out of the launch and named (its item an error saying which check).
"""

from __future__ import annotations

import pytest

from nvtest.checks.api import Judge, ProbeSkip
from nvtest.checks.workload.training import judge_training_result
from nvtest.jobs.base import node_recipe, require_launched, require_up
from nvtest.jobs.torchrun import node_share, run_torchrun


@pytest.mark.check(
    "train_multinode", area="workload", title="Multi-node training smoke run (torchrun, DDP)"
)
def test_train_multinode(node, nvtest_context, judge: Judge) -> None:
    ctx = nvtest_context
    require_up(ctx, node)
    if len(ctx.nodes) < 2:
        raise ProbeSkip("one node in this run: the single-node smoke run is the train_smoke check")
    require_launched(ctx, "train_multinode", node, judge.detail)
    recipe = node_recipe(ctx, ctx.nodes[0], "train_multinode")
    steps = int(recipe.get("steps", 30))
    timeout = float(recipe.get("timeout_s", 600))
    job = run_torchrun(
        ctx,
        "train_multinode",
        "train_smoke.py",
        ["--steps", str(steps), "--timeout-s", str(int(timeout))],
        nproc_per_node=int(recipe.get("nproc_per_node", 1)),
        timeout_s=timeout + 60,
    )
    judge.log = ctx.phases.log_path("train_multinode", node.name)
    judge.detail("rank_nodes", {str(r): n for r, n in sorted(job.rank_nodes.items())})
    doc = node_share(job, node)
    r = doc["results"][0]
    judge_training_result(judge, r)
    mine = [k for k, n in job.rank_nodes.items() if n == node.name]
    judge.detail("node_ranks", mine)
    if r.get("world_size") != len(job.rank_nodes):
        judge.fail(f"world size {r.get('world_size')}, {len(job.rank_nodes)} ranks launched")
