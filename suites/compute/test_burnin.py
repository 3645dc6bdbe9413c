"""Burn-in: sustained GEMM on every GPU at once for ``--duration`` seconds.

Clocks, temperature, power and throttle reasons are sampled by NVML every second
while it runs. The verdict comes from the sustained TFLOP/s per window, throttling
events (HW slowdown and thermal fail, SW power capping warns), the temperature,
and results that must stay bit-identical when the same product is repeated
(silent data corruption). Duration: ``nvtest run --suite burnin --duration 3600``,
else the SKU recipe's ``burnin.seconds``, else 600 s.
"""

from __future__ import annotations

import pytest

from nvtest.checks.api import Judge, Probe, RunContext, SkuProfile
from nvtest.checks.health import apply
from nvtest.checks.health.thermal import thermal

DEFAULT_SECONDS = 600.0


@pytest.mark.check("burnin", area="compute", title="Burn-in: sustained GEMM with telemetry")
def test_burnin(node, nvtest_context: RunContext, sku: SkuProfile | None, measure, judge: Judge) -> None:
    recipe = (sku.recipe.get("burnin") if sku else None) or {}
    seconds = nvtest_context.config.duration_s or float(recipe.get("seconds", DEFAULT_SECONDS))
    probe = Probe(
        "burnin",
        script="burnin_probe.py",
        args=["--seconds", f"{seconds:g}", "--dtype", str(recipe.get("dtype", "bf16"))],
        timeout_s=seconds + 600,
        needs=("gpu",),
        device="gpu",
        expects="gpu",
    )
    measure.require_declared(probe)  # a node without GPUs skips before the duration is recorded
    judge.detail("duration_s", seconds)
    apply(thermal(measure(probe)), judge)
