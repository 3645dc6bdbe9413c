"""Burn-in: throttle classification, SDC comparison and window statistics on synthetic data."""

from __future__ import annotations

import _burnin_logic as bl
import pytest

GPU0, GPU1 = "00000000:1b:00.0", "00000000:2c:00.0"


def test_decode_throttle_names_bits():
    assert bl.decode_throttle(0) == []
    assert bl.decode_throttle(0x4 | 0x40) == ["sw_power_cap", "hw_thermal_slowdown"]
    assert bl.decode_throttle(0x88) == ["hw_slowdown", "hw_power_brake_slowdown"]
    assert bl.decode_throttle(0x1000) == ["bit_0x1000"]
    assert [bl.severity(r) for r in ("hw_slowdown", "sw_thermal_slowdown", "sw_power_cap", "gpu_idle")] == [
        "fail",
        "warn",
        "info",
        "ignore",
    ]


def _samples(gpu, masks, temps=None):
    return [
        {
            "t": float(i),
            "gpu": gpu,
            "throttle_mask": m,
            "temp_c": (temps or [60] * len(masks))[i],
            "power_w": 500.0 + i,
            "sm_clock_mhz": 1980 - 100 * bool(m & 0x48),
            "mem_clock_mhz": 2619,
        }
        for i, m in enumerate(masks)
    ]


def test_throttle_events_are_contiguous_runs_per_gpu():
    samples = _samples(GPU0, [0, 0x8, 0x8, 0, 0x8 | 0x4, 0x1]) + _samples(GPU1, [0x4, 0x4, 0, 0, 0, 0])
    events = bl.throttle_events(samples, period_s=1.0)
    hw = [e for e in events if e["reason"] == "hw_slowdown"]
    assert [(e["start_s"], e["end_s"], e["samples"], e["seconds"]) for e in hw] == [
        (1.0, 2.0, 2, 2.0),
        (4.0, 4.0, 1, 1.0),
    ]
    assert all(e["gpu"] == GPU0 and e["severity"] == "fail" for e in hw)
    power = [(e["gpu"], e["samples"]) for e in events if e["reason"] == "sw_power_cap"]
    assert sorted(power) == [(GPU0, 1), (GPU1, 2)]
    assert not [e for e in events if e["reason"] == "gpu_idle"]  # ignored


def test_telemetry_summary_per_gpu():
    samples = _samples(GPU0, [0, 0x20, 0x20, 0], temps=[70, 84, 88, 80]) + _samples(GPU1, [0x4] * 4)
    summary = bl.telemetry_summary(samples, period_s=0.5)
    g0, g1 = summary[GPU0], summary[GPU1]
    assert g0["max_temp_c"] == 88 and g0["samples"] == 4
    assert g0["worst_throttle"] == "warn" and g0["throttle_seconds"] == {"sw_thermal_slowdown": 1.0}
    assert g0["max_power_w"] == 503.0
    assert g1["worst_throttle"] == "info"
    assert g1["sm_clock_mhz"] == {"min": 1980, "median": 1980, "max": 1980}


def _windows(rates, seconds=None):
    seconds = seconds or [10.0] * len(rates)
    return [
        {"index": i, "t_start_s": 10.0 * i, "seconds": s, "products": 1, "tflops": r, "digest": "x"}
        for i, (r, s) in enumerate(zip(rates, seconds, strict=True))
    ]


def test_window_stats_drop_and_spread():
    st = bl.window_stats(_windows([700, 700, 690, 560, 700]))
    assert st["windows"] == 5
    assert st["tflops_min"] == 560 and st["tflops_max"] == 700 and st["tflops_median"] == 700
    assert st["drop_pct"] == pytest.approx(20.0)
    assert st["tflops_first"] == 700 and st["tflops_last"] == 700
    assert st["cv_pct"] > 5
    steady = bl.window_stats(_windows([700.0] * 4))
    assert steady["drop_pct"] == 0 and steady["cv_pct"] == 0


def test_short_tail_window_is_left_out():
    st = bl.window_stats(_windows([700, 700, 700, 100], seconds=[10, 10, 10, 0.5]))
    assert st["windows"] == 3 and st["tflops_min"] == 700


def test_sdc_check_flags_mismatching_windows():
    assert bl.sdc_check("aa", ["aa", "aa", "aa"]) == {
        "ok": True,
        "reference": "aa",
        "windows_checked": 3,
        "mismatched_windows": [],
    }
    bad = bl.sdc_check("aa", ["aa", "ab", "aa", "ac"])
    assert bad["ok"] is False and bad["mismatched_windows"] == [1, 3]
    assert bl.sdc_check("aa", [])["ok"] is False  # nothing compared is not a pass


def test_cross_device_names_the_odd_one_out():
    same = bl.cross_device({"cuda:0": "h", "cuda:1": "h"})
    assert same == {"identical": True, "groups": 1, "outliers": []}
    odd = bl.cross_device({"cuda:0": "h", "cuda:1": "h", "cuda:2": "z"})
    assert odd["identical"] is False and odd["outliers"] == ["cuda:2"]


def test_cpu_burnin_runs_windows_without_telemetry(probe):
    run = probe(
        "burnin_probe.py",
        "--device",
        "cpu",
        "--seconds",
        "2",
        "--window-s",
        "0.5",
        "--size",
        "128",
        env={"NVTEST_PROBE_DISABLE": "torch"},
    )
    doc = run.doc
    assert doc["status"] == "ok", doc
    assert doc["telemetry"] is None and "cpu" in doc["telemetry_reason"]
    (r,) = doc["results"]
    assert r["library"].startswith("numpy") and r["dtype"] == "fp32"
    assert r["window_stats"]["windows"] >= 3
    assert all(w["products"] >= 1 and w["tflops"] > 0 for w in r["windows"])
    assert r["sdc"]["ok"] is True and r["sdc"]["windows_checked"] == len(r["windows"])
    assert doc["cross_device"]["identical"] is True


def test_cpu_burnin_detects_injected_sdc(probe):
    run = probe(
        "burnin_probe.py",
        "--device",
        "cpu",
        "--seconds",
        "1",
        "--window-s",
        "0.4",
        "--size",
        "64",
        "--inject-sdc",
        env={"NVTEST_PROBE_DISABLE": "torch"},
    )
    (r,) = run.doc["results"]
    assert r["sdc"]["ok"] is False
    assert r["sdc"]["mismatched_windows"] == [len(r["windows"]) - 1]


def test_cpu_burnin_with_torch(probe):
    run = probe("burnin_probe.py", "--device", "cpu", "--seconds", "1", "--size", "128")
    (r,) = run.doc["results"]
    assert r["library"].startswith("torch") and r["sdc"]["ok"] is True
