"""Pure decision inputs of the burn-in probe: throttle decoding, SDC comparison, window stats.

No I/O and no optional imports: everything here works on plain dicts and
lists so it can be tested on synthetic telemetry.

Telemetry sample (one per GPU per sampling period)::

    {"t": seconds since start, "gpu": PCI bus id, "sm_clock_mhz": int,
     "mem_clock_mhz": int, "temp_c": int, "power_w": float, "throttle_mask": int}

Window (one per ``--window-s`` of sustained GEMM on one device)::

    {"index": int, "t_start_s": float, "seconds": float, "products": int,
     "tflops": float, "digest": str}
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

#: NVML clocks-event (throttle) reason bits, nvml.h ``nvmlClocksEventReason*``
#: (formerly ``nvmlClocksThrottleReason*``), with the names reported.
THROTTLE_BITS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
#: How much each reason matters under sustained load.  ``fail``: the hardware
#: protected itself (HW slowdown, HW thermal, power brake: cooling or power
#: delivery fault); ``warn``: software thermal slowdown (running hot); ``info``:
#: power capping, expected at full load on many SKUs; ``ignore``: idle and
#: clock-policy reasons that say nothing about health.
SEVERITY = {
    "hw_slowdown": "fail",
    "hw_thermal_slowdown": "fail",
    "hw_power_brake_slowdown": "fail",
    "sw_thermal_slowdown": "warn",
    "sw_power_cap": "info",
}
SEVERITY_ORDER = ("ignore", "info", "warn", "fail")


def decode_throttle(mask: int) -> list[str]:
    """Names of the reason bits set in an NVML throttle mask; unknown bits as ``"bit_0x..."``."""
    names = [name for bit, name in THROTTLE_BITS.items() if mask & bit]
    unknown = mask & ~sum(THROTTLE_BITS)
    bit = 1
    while unknown:
        if unknown & bit:
            names.append(f"bit_{bit:#x}")
            unknown &= ~bit
        bit <<= 1
    return names


def severity(reason: str) -> str:
    """``fail`` / ``warn`` / ``info`` / ``ignore`` for a decoded reason name."""
    return SEVERITY.get(reason, "ignore")


def worst(severities: Iterable[str]) -> str:
    """The most serious of the given severities (``ignore`` for none)."""
    return max(severities, key=SEVERITY_ORDER.index, default="ignore")


def throttle_events(samples: Sequence[dict[str, Any]], period_s: float) -> list[dict[str, Any]]:
    """Contiguous runs of a throttle reason on one GPU, as events.

    A run is a maximal sequence of consecutive samples of that GPU (in time
    order) whose mask has the reason's bit.  Event: ``{"gpu", "reason",
    "severity", "start_s", "end_s", "samples", "seconds"}`` where ``seconds`` =
    samples x ``period_s`` (each sample stands for one period).  Reasons of
    severity ``ignore`` are left out.  Sorted by start time, then GPU.
    """
    events: list[dict[str, Any]] = []
    by_gpu: dict[str, list[dict[str, Any]]] = {}
    for s in samples:
        if s.get("throttle_mask") is not None:
            by_gpu.setdefault(s["gpu"], []).append(s)
    for gpu, series in by_gpu.items():
        series.sort(key=lambda s: s["t"])
        open_runs: dict[str, dict[str, Any]] = {}
        for s in series:
            active = {r for r in decode_throttle(int(s["throttle_mask"])) if severity(r) != "ignore"}
            for reason in list(open_runs):
                if reason not in active:
                    events.append(open_runs.pop(reason))
            for reason in active:
                run = open_runs.setdefault(reason, {
                    "gpu": gpu, "reason": reason, "severity": severity(reason),
                    "start_s": s["t"], "end_s": s["t"], "samples": 0, "seconds": 0.0,
                })
                run["end_s"] = s["t"]
                run["samples"] += 1
                run["seconds"] = run["samples"] * period_s
        events.extend(open_runs.values())
    return sorted(events, key=lambda e: (e["start_s"], e["gpu"], e["reason"]))


def _spread(values: Sequence[float]) -> dict[str, float] | None:
    if not values:
        return None
    xs = sorted(values)
    n = len(xs)
    median = xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])
    return {"min": xs[0], "median": median, "max": xs[-1]}


def telemetry_summary(samples: Sequence[dict[str, Any]], period_s: float) -> dict[str, dict[str, Any]]:
    """Per GPU: sample count, max temperature and power, SM clock spread, throttle events.

    Returns ``{gpu: {"samples", "max_temp_c", "max_power_w", "sm_clock_mhz":
    {"min","median","max"}, "throttle_events": [...], "throttle_seconds":
    {reason: s}, "worst_throttle": severity}}``.
    """
    out: dict[str, dict[str, Any]] = {}
    events = throttle_events(samples, period_s)
    for gpu in sorted({s["gpu"] for s in samples}):
        mine = [s for s in samples if s["gpu"] == gpu]
        temps = [s["temp_c"] for s in mine if s.get("temp_c") is not None]
        powers = [s["power_w"] for s in mine if s.get("power_w") is not None]
        clocks = [s["sm_clock_mhz"] for s in mine if s.get("sm_clock_mhz") is not None]
        ev = [e for e in events if e["gpu"] == gpu]
        seconds: dict[str, float] = {}
        for e in ev:
            seconds[e["reason"]] = seconds.get(e["reason"], 0.0) + e["seconds"]
        out[gpu] = {
            "samples": len(mine),
            "max_temp_c": max(temps) if temps else None,
            "max_power_w": max(powers) if powers else None,
            "sm_clock_mhz": _spread(clocks),
            "throttle_events": ev,
            "throttle_seconds": seconds,
            "worst_throttle": worst(e["severity"] for e in ev),
        }
    return out


def window_stats(windows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Sustained TFLOP/s over the windows of one device.

    ``{"windows", "tflops_min", "tflops_median", "tflops_max", "tflops_first",
    "tflops_last", "drop_pct", "cv_pct"}``: ``drop_pct`` = (max - min) / max x 100,
    the largest slowdown during the run; ``cv_pct`` the coefficient of
    variation (population std / mean x 100).  The last window is left out of the
    spread when it is under half the length of the others (a tail).
    """
    if not windows:
        return {"windows": 0}
    use = list(windows)
    if len(use) > 2 and use[-1]["seconds"] < 0.5 * use[-2]["seconds"]:
        use = use[:-1]
    rates = [w["tflops"] for w in use]
    spread = _spread(rates) or {}
    mean = sum(rates) / len(rates)
    var = sum((r - mean) ** 2 for r in rates) / len(rates)
    return {
        "windows": len(use),
        "tflops_min": spread["min"],
        "tflops_median": spread["median"],
        "tflops_max": spread["max"],
        "tflops_first": rates[0],
        "tflops_last": rates[-1],
        "drop_pct": 100.0 * (spread["max"] - spread["min"]) / spread["max"] if spread["max"] else 0.0,
        "cv_pct": 100.0 * math.sqrt(var) / mean if mean else 0.0,
    }


def sdc_check(reference: str, digests: Sequence[str]) -> dict[str, Any]:
    """Compare each window's output digest with the first product's digest.

    The same A @ B on the same device must give bit-identical output every
    time (cuBLAS/BLAS are deterministic for a fixed algorithm and shape);
    a mismatch is silent data corruption.  ``{"ok", "reference",
    "windows_checked", "mismatched_windows": [window indices]}``.
    """
    bad = [i for i, d in enumerate(digests) if d != reference]
    return {"ok": not bad and bool(digests), "reference": reference,
            "windows_checked": len(digests), "mismatched_windows": bad}


def cross_device(references: dict[str, str]) -> dict[str, Any]:
    """Whether all devices produced the same output for the same inputs (informational).

    Identical models with the same library pick the same kernels, so their
    outputs usually match bit for bit; a device alone in its group is worth a
    look, not a verdict (different SKUs legitimately differ).
    """
    groups: dict[str, list[str]] = {}
    for device, digest in references.items():
        groups.setdefault(digest, []).append(device)
    majority = max(groups.values(), key=len) if groups else []
    return {"identical": len(groups) <= 1, "groups": len(groups),
            "outliers": sorted(d for g in groups.values() if g is not majority for d in g)}
