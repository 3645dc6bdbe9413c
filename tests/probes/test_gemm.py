"""GEMM probe: flop counting, tolerances, the accuracy check, CPU runs."""

from __future__ import annotations

import math

import _gemm_backends as gemm
import gemm_probe as gp
import numpy as np
import pytest

FAST = ("--size", "128", "--min-seconds", "0.05", "--pairs", "2")


def test_flops_and_tflops():
    assert gemm.gemm_flops(2, 3, 4) == 48
    assert gemm.tflops(1000, 1000, 1000, 2.0) == pytest.approx(2e9 / 2.0 / 1e12)


def test_tolerance_orders_dtypes_and_grows_with_sqrt_k():
    tol = {d: gp.gemm_tolerance(d, 4096) for d in gemm.GEMM_DTYPES}
    assert tol["fp64"] < tol["fp32"] < tol["fp16"] < tol["bf16"]
    assert tol["tf32"] == pytest.approx(tol["fp16"], rel=1e-3)  # same 11-bit significand
    assert tol["fp8"] == pytest.approx(tol["bf16"])  # fp8 inputs are exact, output bf16
    acc64 = gp.gemm_tolerance("fp64", 4 * 4096) - 2 * gp.UNIT_ROUNDOFF["fp64"]
    assert acc64 == pytest.approx(2 * (tol["fp64"] - 2 * gp.UNIT_ROUNDOFF["fp64"]))
    assert tol["fp64"] < 1e-13 and tol["bf16"] < 1e-2


@pytest.mark.parametrize("dtype", ["fp64", "fp32"])
def test_sample_check_passes_clean_and_catches_corruption(dtype):
    backend = gemm.NumpyGemm(np)
    a, b = backend.operands(dtype, 64, 48, 256, seed=3)
    assert np.all(a != 0) and a.min() >= -1 and a.max() < 1
    rows = gp.sample_rows(64)
    c = backend.matmul(dtype)(a, b)
    clean = gp.check_result(backend.rows_error(a, b, c, rows), dtype, 256)
    assert clean["ok"], clean
    # a 0.1 % change of one element is far outside rounding for these dtypes
    c[rows[1], 5] *= 1.001
    bad = gp.check_result(backend.rows_error(a, b, c, rows), dtype, 256)
    assert not bad["ok"] and bad["max_rel_err"] > bad["tolerance"]


def test_nan_result_never_passes():
    assert gp.check_result(float("nan"), "fp32", 128)["ok"] is False
    assert gp.check_result(math.inf, "fp32", 128)["ok"] is False


def test_sample_rows_include_first_and_last():
    rows = gp.sample_rows(1000)
    assert rows[0] == 0 and rows[-1] == 999 and rows == sorted(set(rows))


@pytest.fixture(scope="module")
def cpu_run(probe):
    return probe("gemm_probe.py", "--device", "cpu", *FAST)


def test_cpu_run_measures_numpy_and_torch_dtypes(cpu_run):
    doc = cpu_run.doc
    assert doc["status"] == "ok", doc
    assert doc["device"] == "cpu"
    got = {(r["library"].split()[0], r["dtype"]): r for r in doc["results"]}
    assert {
        ("numpy", "fp64"),
        ("numpy", "fp32"),
        ("torch", "fp64"),
        ("torch", "fp32"),
    } <= got.keys()
    for r in doc["results"]:
        if r["status"] == "skip":
            continue
        assert r["device"] == "cpu" and r["m"] == r["n"] == r["k"] == 128
        assert r["check"]["ok"] is True, r
        assert r["reps"] >= 5
        mean_tflops = gemm.gemm_flops(128, 128, 128) * r["reps"] / r["seconds_total"] / 1e12
        assert r["tflops_min"] <= mean_tflops <= r["tflops_max"]
        assert r["tflops_min"] <= r["tflops_median"] <= r["tflops_max"]


def test_injected_error_fails_the_check(probe):
    run = probe(
        "gemm_probe.py",
        "--device",
        "cpu",
        *FAST,
        "--dtypes",
        "fp64,fp32",
        "--inject-error",
        env={"NVTEST_PROBE_DISABLE": "torch"},
    )
    assert [r["dtype"] for r in run.doc["results"]] == ["fp64", "fp32"]
    for r in run.doc["results"]:
        assert r["check"]["ok"] is False
        assert r["check"]["max_rel_err"] > r["check"]["tolerance"]


def test_auto_size_reaches_the_time_targets(probe):
    run = probe(
        "gemm_probe.py",
        "--device",
        "cpu",
        "--dtypes",
        "fp32",
        "--min-seconds",
        "0.3",
        env={"NVTEST_PROBE_DISABLE": "torch"},
    )
    (r,) = run.doc["results"]
    assert r["m"] > 256 and r["m"] % 64 == 0
    assert r["seconds_total"] >= 0.3
    per_product = r["seconds_total"] / r["reps"]
    assert per_product >= 0.05  # sized for ~0.1 s; generous for a loaded machine


def test_gpu_only_dtypes_are_skipped_on_cpu_with_reason(probe):
    run = probe(
        "gemm_probe.py",
        "--device",
        "cpu",
        *FAST,
        "--dtypes",
        "fp16,fp8",
        env={"NVTEST_PROBE_DISABLE": "torch"},
    )
    assert run.doc["status"] == "skip"
    assert all(r["status"] == "skip" and "numpy" in r["reason"] for r in run.doc["results"])


def test_unknown_dtype_is_a_usage_error(probe):
    run = probe("gemm_probe.py", "--device", "cpu", "--dtypes", "fp7", env={"NVTEST_PROBE_DISABLE": "torch"})
    assert run.doc["status"] == "error" and "fp7" in run.doc["reason"]
