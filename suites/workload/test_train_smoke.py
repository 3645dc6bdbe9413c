"""Training smoke run: a tiny transformer trained with DDP on synthetic tokens.

Two local ranks (torch.multiprocessing, gloo on CPU, NCCL on GPUs), 30 steps;
passes when the loss falls (mean of the last 5 steps below 90% of the first 5),
no loss is NaN, and every rank finishes within the timeout.
"""

from __future__ import annotations

import pytest

from nvtest.check import Judge, Probe
from nvtest.inventory import Node
from nvtest.thresholds import SkuProfile


def _args(node: Node, sku: SkuProfile | None) -> list[str]:
    recipe = (sku.recipe.get("train_smoke") if sku else None) or {}
    return ["--nproc", str(recipe.get("nproc", 2)), "--steps", str(recipe.get("steps", 30))]


TRAIN = Probe("train_smoke", script="train_smoke.py", args=_args, timeout_s=600)


@pytest.mark.check("train_smoke", area="workload", title="Training smoke run (DDP)")
def test_train_smoke(node, measure, judge: Judge) -> None:
    doc = measure(TRAIN)
    r = doc["results"][0] if doc.get("results") else doc
    first, last = r.get("first_loss"), r.get("last_loss")
    losses = r.get("losses") or []
    head = losses[:5] or [first]
    tail = losses[-5:] or [last]
    ratio = (sum(tail) / len(tail)) / (sum(head) / len(head)) if head and tail and head[0] else None
    judge("final_loss_ratio", ratio, "ratio")
    judge("step_time_s", r.get("step_time_median_s"), "s")
    judge("tokens_per_s", r.get("tokens_per_s"), "tokens/s")
    if r.get("nan"):
        judge.fail("a loss was NaN")
    if not r.get("loss_fell", False):
        judge.fail(f"loss did not fall: first {first}, last {last}")
    judge.detail("ranks", r.get("rank_hosts"))
    judge.detail("world_size", r.get("world_size"))
