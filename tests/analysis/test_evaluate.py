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
    proc = run_nvtest("run", "--suite", "quick", "--out", str(out), "--progress", "none", timeout=600)
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
    proc = run_nvtest("evaluate", str(quick_run), "--sku", "cpu-generic", "--overlay", str(lax), "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads((out / "results.json").read_text())["summary"]["verdict"] in ("pass", "warn")


def test_evaluate_unknown_sku_is_a_usage_error(quick_run: Path):
    proc = run_nvtest("evaluate", str(quick_run), "--sku", "nope")
    assert proc.returncode == 2 and "known:" in proc.stderr


def test_help_has_examples():
    for args in (["skus", "show", "--help"], ["skus", "match", "--help"], ["evaluate", "--help"]):
        proc = run_nvtest(*args)
        assert proc.returncode == 0 and "Example:" in proc.stdout, args


def test_a_cpu_run_judged_as_an_h100_fails_on_what_the_node_is(quick_run: Path, tmp_path: Path):
    out = tmp_path / "as-h100"
    proc = run_nvtest("evaluate", str(quick_run), "--sku", "h100-sxm-80gb", "--out", str(out))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    new = json.loads((out / "results.json").read_text())
    by = {r["check"]: r for r in new["results"]}
    assert by["gpus"]["verdict"] == "fail" and "expects 8" in by["gpus"]["reason"]  # the facts, not a skip
    gemm = by["gemm"]
    assert gemm["verdict"] == "error" and "bf16_tflops: not measured in this run" in gemm["reason"]
    assert all(m["bound"] for m in gemm["metrics"] if m["value"] is not None)
    assert new["summary"]["verdict"] == "fail" and "h100-sxm-80gb" in new["skus"]


def test_an_overlay_alone_rejudges_each_node_with_its_own_sku(quick_run: Path, tmp_path: Path):
    strict = _overlay(tmp_path / "strict.yaml", 1e3, 1e-12)
    proc = run_nvtest("evaluate", str(quick_run), "--overlay", str(strict))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    new = json.loads((quick_run / "evaluate-strict" / "results.json").read_text())
    assert set(new["skus"]) == {"cpu-generic"} and new["run"]["forced_sku"] is None
    stream = next(r for r in new["results"] if r["check"] == "stream")
    assert stream["verdict"] == "fail" and stream["metrics"][0]["threshold"]["origin"] == f"overlay:{strict}"
    gpus = next(r for r in new["results"] if r["check"] == "gpus")
    assert gpus["verdict"] == "skip"  # cpu-generic expects no GPU: the skip still holds


def _item(check: str, metrics: list[dict], verdict: str = "pass", reason: str = "") -> dict:
    return {"check": check, "node": "n1", "verdict": verdict, "reason": reason, "metrics": metrics}


def test_rejudging_applies_plausibility_skips_and_unmeasured_thresholds():
    from nvtest.analysis.reevaluate import rejudge
    from nvtest.config.skus import load_catalog

    cat = load_catalog()
    h100, a100, cpu = cat.get("h100-sxm-80gb"), cat.get("a100-sxm-80gb"), cat.get("cpu-generic")
    h2d = _item(
        "h2d", [{"name": "h2d_gbps", "value": 55.0, "unit": "GB/s", "verdict": "pass", "labels": {"device": "cuda:0"}}]
    )
    ok = rejudge(h2d, h100, cat)
    assert ok["metrics"][0]["verdict"] == "pass" and ok["metrics"][0]["bound"]["max"] == 69.3088
    assert {m["name"] for m in ok["metrics"] if m["verdict"] == "error"} == {"d2h_gbps", "d2d_read_ce_gbps"}
    on_a100 = rejudge(h2d, a100, cat)  # an a100's Gen4 x16 link cannot carry 55 GB/s
    m = on_a100["metrics"][0]
    assert m["verdict"] == "error" and m["reason"].startswith("implausible: 55 GB/s > 34.6")
    assert m["threshold"] is None and m["bound"]["implausible"]
    skipped = _item("devmem", [], "skip", "no NVIDIA GPU: nvidia-smi lists none")
    assert rejudge(skipped, cpu, cat, facts={"gpus": []})["verdict"] == "skip"
    as_h100 = rejudge(skipped, h100, cat, facts={"gpus": []})
    assert as_h100["verdict"] == "error" and "h100-sxm-80gb has thresholds for devmem" in as_h100["reason"]
    ecc = rejudge(_item("ecc", [], "skip", "no NVIDIA GPU"), h100, cat, facts={"gpus": []})
    assert ecc["verdict"] == "error" and "expects 8 GPUs" in ecc["reason"]
