"""Clocks, throttling and temperature under a sustained GEMM, reported beside its TFLOP/s.

Runs the burn-in probe for the SKU recipe's ``thermal: {seconds, dtype}`` (60 s
of bf16 by default) on every GPU at once, sampling NVML meanwhile.
"""

from __future__ import annotations

import pytest

from nvtest.checks.api import Judge, Node, Probe, SkuProfile
from nvtest.checks.health import apply
from nvtest.checks.health.thermal import thermal


def _args(node: Node, sku: SkuProfile | None) -> list[str]:
    recipe = (sku.recipe.get("thermal") if sku else None) or {}
    return [
        "--seconds",
        str(recipe.get("seconds", 60)),
        "--dtype",
        str(recipe.get("dtype", "bf16")),
    ]


BURN = Probe(
    "thermal-burn", script="burnin_probe.py", args=_args, timeout_s=1200, needs=("gpu",), device="gpu", expects="gpu"
)


@pytest.mark.check("thermal", area="health", title="Clocks, throttling and temperature under load")
def test_thermal(node, judge: Judge, measure) -> None:
    """HW throttling fails, SW thermal throttling warns, temperature against the SKU maximum."""
    apply(thermal(measure(BURN)), judge)
