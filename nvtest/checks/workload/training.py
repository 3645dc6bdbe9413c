"""Judging a training smoke run's result, shared by the single-node and multi-node checks.

The result is the ``results[0]`` entry of ``train_smoke.py``'s JSON document:
``losses`` (per step), ``first_loss``, ``last_loss``, ``loss_fell``, ``any_nan``,
``step_time_median_s``, ``tokens_per_s``, ``world_size``, ``ranks``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nvtest.checks.api import Fleet, Judge, Node, ProbeSkip
from nvtest.jobs.base import node_recipe, require_launched, require_up
from nvtest.jobs.torchrun import node_share, run_torchrun

__all__ = ["final_loss_ratio", "judge_training_result", "multinode"]

#: Steps averaged at the start and at the end of the run for the loss ratio.
WINDOW = 5


def final_loss_ratio(losses: list[float], window: int = WINDOW) -> float | None:
    """Mean loss of the last ``window`` steps over the mean of the first ``window`` steps.

    None when there are no losses or the first mean is 0.
    """
    head, tail = losses[:window], losses[-window:]
    if not head or not tail or sum(head) == 0:
        return None
    return (sum(tail) / len(tail)) / (sum(head) / len(head))


def judge_training_result(judge: Judge, r: Mapping[str, Any]) -> None:
    """Record ``final_loss_ratio`` (ratio), ``step_time_s`` (s) and ``tokens_per_s``;
    fail on a NaN/inf loss or a loss that did not fall; keep the rank map as a detail."""
    judge("final_loss_ratio", final_loss_ratio(list(r.get("losses") or [])), "ratio")
    judge("step_time_s", r.get("step_time_median_s"), "s")
    judge("tokens_per_s", r.get("tokens_per_s"), "tokens/s")
    if r.get("any_nan"):
        judge.fail("a loss was NaN or inf")
    if not r.get("loss_fell"):
        judge.fail(f"loss did not fall: first {r.get('first_loss')}, last {r.get('last_loss')}")
    judge.detail("ranks", r.get("ranks"))
    judge.detail("world_size", r.get("world_size"))


def multinode(fleet: Fleet, node: Node, judge: Judge) -> None:
    """Check ``train_multinode`` on ``node``: the training smoke run under torchrun over the
    run's nodes (once per run; recipe ``train_multinode``: ``steps`` 30, ``timeout_s`` 600,
    ``nproc_per_node`` 1), judged on rank 0's result for this node's share.

    Raises:
        ProbeSkip: one node in the run (the single-node run is the train_smoke check).
        NodeError: the node was down, left out of the launch, or its ranks did not finish.
        ProbeError: the job's launcher or rank 0 failed (their words).
    """
    ctx = fleet.ctx
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
