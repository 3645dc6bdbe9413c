"""`nvtest evaluate` on a real stored run: re-judged offline, exit code by the new verdict."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests.conftest import run_nvtest


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("reports")
    proc = run_nvtest(
        "run", "--suite", "quick", "--out", str(out), "--progress", "none", timeout=600
    )
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    return (out / "latest").resolve()


def _overlay(path: Path, triad_min: float, gemm_min: float) -> Path:
    path.write_text(
        "schema_version: 1\nname: site\napplies_to: [cpu-generic]\nthresholds:\n"
        f"  stream:\n    triad_gbps: {{min: {triad_min}, unit: GB/s, source: site contract}}\n"
        f"    copy_gbps: {{min: {triad_min}, unit: GB/s, source: site contract}}\n"
        f"  gemm:\n    fp64_tflops: {{min: {gemm_min}, unit: TFLOP/s, source: site contract}}\n"
        f"    fp32_tflops: {{min: {gemm_min}, unit: TFLOP/s, source: site contract}}\n"
    )
    return path


def test_evaluate_rejudges_without_touching_the_run(quick_run: Path, tmp_path: Path):
    before = hashlib.sha256((quick_run / "results.json").read_bytes()).hexdigest()
    old = json.loads((quick_run / "results.json").read_text())
    strict = _overlay(tmp_path / "strict.yaml", 1e9, 1e9)
    proc = run_nvtest("evaluate", str(quick_run), "--sku", "cpu-generic", "--overlay", str(strict))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    new = json.loads((quick_run / "evaluate-cpu-generic" / "results.json").read_text())
    stream = next(r for r in new["results"] if r["check"] == "stream")
    assert stream["verdict"] == "fail" and "< min 1e+09 GB/s" in stream["reason"]
    assert stream["metrics"][0]["threshold"]["origin"] == f"overlay:{strict}"
    assert stream["diagnosis"]["class"] == "RETEST"
    assert [m["value"] for m in stream["metrics"]] == [
        m["value"] for m in next(r for r in old["results"] if r["check"] == "stream")["metrics"]
    ]
    assert new["run"]["evaluated_from"]["run_id"] == old["run"]["run_id"]
    assert (quick_run / "evaluate-cpu-generic" / "report.html").is_file()
    assert hashlib.sha256((quick_run / "results.json").read_bytes()).hexdigest() == before

    lax = _overlay(tmp_path / "lax.yaml", 1e-9, 1e-12)
    out = tmp_path / "lax"
    proc = run_nvtest(
        "evaluate", str(quick_run), "--sku", "cpu-generic", "--overlay", str(lax), "--out", str(out)
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads((out / "results.json").read_text())["summary"]["verdict"] in ("pass", "warn")


def test_evaluate_unknown_sku_is_a_usage_error(quick_run: Path):
    proc = run_nvtest("evaluate", str(quick_run), "--sku", "nope")
    assert proc.returncode == 2 and "known:" in proc.stderr


def test_help_has_examples():
    for args in (["skus", "show", "--help"], ["skus", "match", "--help"], ["evaluate", "--help"]):
        proc = run_nvtest(*args)
        assert proc.returncode == 0 and "Example:" in proc.stdout, args
