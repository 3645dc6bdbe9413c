"""Clocks, throttling and temperature under a sustained GEMM, reported beside its TFLOP/s.

Runs the burn-in probe for the SKU recipe's ``thermal: {seconds, dtype}`` (60 s
of bf16 by default) on every GPU at once, sampling NVML meanwhile.
"""

from __future__ import annotations

import pytest

from nvtest.checks.api import Judge, Probe
from nvtest.checks.health import apply
from nvtest.checks.health.thermal import thermal
from nvtest.config.inventory import Node
from nvtest.config.thresholds import SkuProfile
from nvtest.session.facts import NodeFacts


def _args(node: Node, sku: SkuProfile | None) -> list[str]:
    recipe = (sku.recipe.get("thermal") if sku else None) or {}
    return [
        "--device",
        "cuda",
        "--seconds",
        str(recipe.get("seconds", 60)),
        "--dtype",
        str(recipe.get("dtype", "bf16")),
    ]


BURN = Probe("thermal-burn", script="burnin_probe.py", args=_args, timeout_s=1200, needs=("gpu",))


@pytest.mark.check("thermal", area="health", title="Clocks, throttling and temperature under load")
def test_thermal(node, judge: Judge, node_facts: NodeFacts, measure) -> None:
    """HW throttling fails, SW thermal throttling warns, temperature against the SKU maximum."""
    if not node_facts.gpus:
        pytest.skip(
            node_facts.gpu_absent_reason or "no NVIDIA GPU: no GPU clocks or temperature to watch"
        )
    apply(thermal(measure(BURN)), judge)
