"""Clocks, throttle reasons and temperature during a sustained GEMM, beside its TFLOP/s.

Input: the burn-in probe's document (``nvtest/probes/burnin_probe.py``): per
device the sustained TFLOP/s windows, a bit-identical output check, and NVML
telemetry sampled meanwhile (max temperature, SM clock spread, throttle events
classified by ``_burnin_logic.SEVERITY``). Verdicts (sku-reference.md, "Thermal
/ throttle under load", [D]):

- HW slowdown, HW thermal slowdown or power-brake throttling: fail (cooling or
  power delivery); SW thermal slowdown: warn; power capping: noted;
- temperature against the SKU's ``thermal.gpu_temp_max_c`` (85 C, SB rule);
- an output that changed between identical products: fail (silent data corruption);
- GPU run without telemetry (no pynvml): error, temperature and clocks were not
  measured; the TFLOP/s are still recorded.

Metrics per device: ``<dtype>_tflops`` (median window, TFLOP/s),
``gpu_temp_max_c`` (C), ``sm_clock_drop_pct`` ((median - min) / median SM clock, %).
"""

from __future__ import annotations

from typing import Any

from nvtest.checks.health import Outcome

__all__ = ["THROTTLED", "thermal"]

#: The cause key of clocks throttled under load (a hardware slowdown fails, a thermal one warns).
THROTTLED = "clocks:throttled"


def thermal(doc: dict[str, Any]) -> Outcome:
    """Judge one burn-in probe document (status ``ok``)."""
    out = Outcome()
    dtype = str(doc.get("dtype") or "fp32")
    gpu_run = doc.get("device") == "cuda"
    measured = 0
    for r in doc.get("results") or []:
        dev = str(r.get("device", "?"))
        if r.get("status") != "ok":
            out.fail(f"{dev}: {r.get('reason') or r.get('status')}")
            continue
        measured += 1
        stats = r.get("window_stats") or {}
        out.measure(f"{dtype}_tflops", stats.get("tflops_median"), "TFLOP/s", device=dev)
        sdc = r.get("sdc") or {}
        if sdc and not sdc.get("ok", False):
            out.fail(
                f"{dev}: output changed between identical products in windows "
                f"{sdc.get('mismatched_windows')} (silent data corruption)",
                "results:wrong",
            )
        tele = r.get("telemetry")
        if not tele:
            continue
        out.measure("gpu_temp_max_c", tele.get("max_temp_c"), "C", device=dev)
        clk = tele.get("sm_clock_mhz") or {}
        if clk.get("median"):
            drop = 100.0 * (clk["median"] - clk["min"]) / clk["median"]
            out.measure("sm_clock_drop_pct", round(drop, 2), "%", device=dev)
        secs = tele.get("throttle_seconds") or {}
        reasons = ", ".join(f"{k} {v:g} s" for k, v in sorted(secs.items()))
        worst = tele.get("worst_throttle")
        if worst == "fail":
            out.fail(f"{dev}: hardware throttling under load ({reasons}): check cooling and power delivery", THROTTLED)
        elif worst == "warn":
            out.warn(f"{dev}: thermal throttling under load ({reasons})", THROTTLED)
        elif reasons:
            out.note(f"{dev}: {reasons}")
        out.details.setdefault("clocks", {})[dev] = {"sm_clock_mhz": clk, "throttle_seconds": secs}
    if gpu_run and not doc.get("telemetry"):
        out.error = f"temperature and clocks not measured: {doc.get('telemetry_reason') or 'no telemetry'}"
    if measured == 0 and not out.failures:
        out.skip = "the burn-in probe measured no device"
    return out
