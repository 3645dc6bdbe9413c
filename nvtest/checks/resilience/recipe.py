"""The resilience checks' parameters: SKU recipe keys, defaults, and environment overrides.

Recipe keys (``configs/skus/*.yaml`` ``recipe:``, or a site overlay; a partial
mapping keeps the defaults of the keys it does not name; the schema, which rejects
unknown keys and bad values when the file is loaded, is
:class:`nvtest.config.thresholds.ResilienceRecipe` / :class:`~nvtest.config.thresholds.CkptRecipe`)::

    ckpt:
      size_mib: 2048            # per node and tier, MiB
      quick_size_mib: 256       # the quick form in the delivery suite
      chunk_mib: 16
      mem_path: /dev/shm/nvtest-ckpt
      local_path: /var/tmp/nvtest-ckpt
      shared_path: null         # a directory on the shared filesystem; null: tier skipped
    resilience:
      nproc: 2                  # ranks per node in the drills
      steps: 30
      ckpt_every: 5             # steps between drill checkpoints
      kill_rank: 1             # one node: the rank killed in the in-job drill
      kill_seed: null           # several nodes: seed of the random kill (node, local rank, step)
      launcher: auto            # auto | ft_launcher | torchrun
      slow_rank: 1              # the straggler drill's injected slow rank
      slow_s: 0.0               # its extra seconds per step (0: no injection, the real check)
      straggler_min_score: 0.75 # relative score below this: a straggler
      requeue_release_hold: false  # true: the requeue check releases Slurm's ~2 min hold
      targets: {injob_recovery_s: 120, inprocess_recovery_s: 20,
                requeue_training_again_s: null}  # seconds; past a target warns; null: none
      estimate: {mtbf_h: 24, interval_min: 30, save_gib: 8, tier: local}

Environment overrides (for tests and quick trials, read on the controller):
``NVTEST_CKPT_SIZE_MIB`` (both sizes), ``NVTEST_RESILIENCE_STEPS``,
``NVTEST_STRAGGLER_INJECT=[NODE/]RANK:SECONDS`` (slow_rank, slow_s; with ``NODE/`` only on
that node).
"""

from __future__ import annotations

import copy
import os
from typing import Any

from nvtest.config.thresholds import CkptRecipe, ResilienceRecipe, SkuProfile

__all__ = [
    "CKPT_DEFAULTS",
    "RESILIENCE_DEFAULTS",
    "ckpt_recipe",
    "resilience_recipe",
    "slow_s_on",
    "TARGET_SOURCES",
]

#: The defaults, from the schema that validates the SKU profile's and overlay's recipe.
CKPT_DEFAULTS: dict[str, Any] = CkptRecipe().model_dump()
RESILIENCE_DEFAULTS: dict[str, Any] = ResilienceRecipe().model_dump()

#: Where the default targets come from (shown beside them in the report).
TARGET_SOURCES = {
    "injob_recovery_s": (
        "NVIDIA Resiliency Extension documentation: in-job restart, 1-2 min from fault to training again"
    ),
    "inprocess_recovery_s": "NVIDIA Resiliency Extension documentation: in-process restart, 10-20 s",
    "requeue_training_again_s": (
        "no published figure for a Slurm requeue: set by the SKU profile or site overlay "
        "(resilience.targets.requeue_training_again_s), none by default"
    ),
    "straggler_min_score": "nvidia-resiliency-ext Report.identify_stragglers default threshold 0.75",
}


def _merged(defaults: dict[str, Any], given: Any) -> dict[str, Any]:
    out = copy.deepcopy(defaults)
    for key, value in (given or {}).items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = {**out[key], **value}
        else:
            out[key] = value
    return out


def ckpt_recipe(sku: SkuProfile | None) -> dict[str, Any]:
    """The ``ckpt`` recipe of ``sku`` over the defaults, with ``NVTEST_CKPT_SIZE_MIB`` applied."""
    rec = _merged(CKPT_DEFAULTS, sku.recipe.get("ckpt") if sku else None)
    env = os.environ.get("NVTEST_CKPT_SIZE_MIB")
    if env:
        rec["size_mib"] = rec["quick_size_mib"] = float(env)
    return rec


def resilience_recipe(sku: SkuProfile | None) -> dict[str, Any]:
    """The ``resilience`` recipe of ``sku`` over the defaults, with ``NVTEST_RESILIENCE_STEPS`` applied."""
    rec = _merged(RESILIENCE_DEFAULTS, sku.recipe.get("resilience") if sku else None)
    env = os.environ.get("NVTEST_RESILIENCE_STEPS")
    if env:
        rec["steps"] = int(env)
    inject = os.environ.get("NVTEST_STRAGGLER_INJECT")
    if inject:
        where, _, secs = inject.partition(":")
        node, _, rank = where.rpartition("/")
        rec["slow_rank"], rec["slow_s"] = int(rank), float(secs or 0.05)
        rec["slow_node"] = node or None
    return rec


def slow_s_on(rec: dict[str, Any], node: str) -> float:
    """The straggler drill's injected seconds per step on ``node``: ``rec["slow_s"]``, or 0
    on every node but ``rec["slow_node"]`` when the injection names one."""
    target = rec.get("slow_node")
    return float(rec["slow_s"]) if target in (None, node) else 0.0
