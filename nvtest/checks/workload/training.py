"""Judging a training smoke run's result, shared by the single-node and multi-node checks.

The result is the ``results[0]`` entry of ``train_smoke.py``'s JSON document:
``losses`` (per step), ``first_loss``, ``last_loss``, ``loss_fell``, ``any_nan``,
``step_time_median_s``, ``tokens_per_s``, ``world_size``, ``ranks``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nvtest.checks.api import Judge

__all__ = ["final_loss_ratio", "judge_training_result"]

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
