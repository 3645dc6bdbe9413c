"""Training smoke run: a tiny transformer trained with DDP on synthetic tokens.

Two local ranks (torch.multiprocessing, gloo on CPU, NCCL on GPUs), 30 steps;
passes when the loss falls (mean of the last 5 steps below 90% of the first 5),
no loss is NaN, and every rank finishes within the timeout.
"""

from __future__ import annotations

import pytest

from nvtest.checks.api import Judge, Node, Probe, SkuProfile
from nvtest.checks.workload.training import judge_training_result


def _args(node: Node, sku: SkuProfile | None) -> list[str]:
    recipe = (sku.recipe.get("train_smoke") if sku else None) or {}
    return ["--nproc", str(recipe.get("nproc", 2)), "--steps", str(recipe.get("steps", 30))]


TRAIN = Probe("train_smoke", script="train_smoke.py", args=_args, timeout_s=600, needs=("gpu",), device="any")


@pytest.mark.check("train_smoke", area="workload", title="Training smoke run (DDP)")
def test_train_smoke(node, measure, judge: Judge) -> None:
    doc = measure(TRAIN)
    judge_training_result(judge, doc["results"][0])
