"""The probes of the resilience checks, with their per-SKU argument recipes.

Kept here (not in the suite modules) because several checks share them: the
in-job drill reads the local tier's bandwidth for its effective-time estimate,
and the delivery suite's quick form reuses the tier probe at a smaller size.
"""

from __future__ import annotations

from collections.abc import Callable

from nvtest.checks.api import Probe
from nvtest.checks.resilience.recipe import ckpt_recipe, resilience_recipe, slow_s_on
from nvtest.config.inventory import Node
from nvtest.config.thresholds import SkuProfile

__all__ = ["CKPT", "CKPT_QUICK", "INJOB", "INPROCESS", "SHARED_FS", "STRAGGLER", "ckpt_args", "drill_args"]

ArgsFn = Callable[[Node, "SkuProfile | None"], list[str]]


def ckpt_args(tier: str, size_key: str = "size_mib", model: bool = True) -> ArgsFn:
    """argv of ``ckpt_probe.py`` for ``tier`` from the ``ckpt`` recipe (``--model``: also the model
    state; the shared tier: ``--deadline-s`` from ``ckpt.shared_deadline_s``)."""

    def args(node: Node, sku: SkuProfile | None) -> list[str]:
        rec = ckpt_recipe(sku)
        bound = ["--deadline-s", str(rec["shared_deadline_s"])] if tier == "shared" else []
        return [
            *bound,
            "--tier",
            tier,
            "--path",
            str(rec.get(f"{tier}_path") or ""),
            "--size-mib",
            str(rec[size_key]),
            "--chunk-mib",
            str(rec["chunk_mib"]),
            *(["--model"] if model else []),
        ]

    return args


def drill_args(kind: str) -> ArgsFn:
    """argv of ``resilience_train.py drill KIND`` from the ``resilience`` recipe."""

    def args(node: Node, sku: SkuProfile | None) -> list[str]:
        r = resilience_recipe(sku)
        return [
            "drill",
            kind,
            "--nproc",
            str(r["nproc"]),
            "--steps",
            str(r["steps"]),
            "--ckpt-every",
            str(r["ckpt_every"]),
            "--kill-rank",
            str(r["kill_rank"]),
            "--slow-rank",
            str(r["slow_rank"]),
            "--slow-s",
            str(slow_s_on(r, node.name)),
            "--launcher",
            str(r["launcher"]),
            "--timeout-s",
            "600",
        ]

    return args


CKPT = {
    tier: Probe(
        f"ckpt_{tier}",
        script="ckpt_probe.py",
        args=ckpt_args(tier),
        timeout_s=1800,
        needs=("gpu", "storage"),
    )
    for tier in ("mem", "local", "shared")
}
CKPT_QUICK = {
    tier: Probe(
        f"ckpt_quick_{tier}",
        script="ckpt_probe.py",
        args=ckpt_args(tier, "quick_size_mib", model=False),
        timeout_s=600,
        needs=("gpu", "storage"),
    )
    for tier in ("mem", "local")
}
#: The delivery suite's shared-filesystem check: the shared tier at the quick size, no model
#: state (no torch, no GPU: it needs the storage only), bounded by ``ckpt.shared_deadline_s``
#: inside the probe (the transport's deadline is the last resort: an NFS ``D`` state outlives it).
SHARED_FS = Probe(
    "shared_fs",
    script="ckpt_probe.py",
    args=ckpt_args("shared", "quick_size_mib", model=False),
    timeout_s=3600,
    needs=("storage",),
)
INJOB = Probe(
    "restart_injob",
    script="resilience_train.py",
    args=drill_args("injob"),
    timeout_s=1500,
    needs=("gpu",),
)
INPROCESS = Probe(
    "restart_inprocess",
    script="resilience_train.py",
    args=drill_args("inprocess"),
    timeout_s=900,
    needs=("gpu",),
)
STRAGGLER = Probe(
    "straggler",
    script="resilience_train.py",
    args=drill_args("straggler"),
    timeout_s=900,
    needs=("gpu",),
)
