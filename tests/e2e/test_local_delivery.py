"""End to end: `nvtest run --suite delivery` on this machine as a one-node cluster."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.conftest import NVTEST, REPO, run_nvtest

pytestmark = pytest.mark.slow

GPU_CHECKS = {"gpus", "devmem", "h2d", "nccl"}


@pytest.fixture(scope="module")
def delivery_run(tmp_path_factory) -> tuple[subprocess.CompletedProcess[str], Path, dict]:
    out = tmp_path_factory.mktemp("reports")
    proc = run_nvtest("run", "--suite", "delivery", "--out", str(out), "--progress", "plain")
    run_dir = (out / "latest").resolve()
    doc = json.loads((run_dir / "results.json").read_text())
    return proc, run_dir, doc


def test_exit_code_and_overall_verdict(delivery_run):
    proc, _, doc = delivery_run
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # one node, one CPU: its SDC digests have no peer to be compared with, a warning
    assert doc["summary"]["verdict"] == "warn"
    assert "overall: WARN" in proc.stdout
    odd = [r for r in doc["results"] if r["verdict"] not in ("pass", "skip")]
    assert [(r["check"], r["verdict"]) for r in odd] == [("sdc", "warn")], odd
    assert "the only CPU of its configuration in this run, nothing could be compared" in odd[0]["reason"]


def test_every_check_present_with_real_numbers(delivery_run):
    _, _, doc = delivery_run
    checks = {r["check"]: r for r in doc["results"]}
    assert {
        "host",
        "gpus",
        "stream",
        "gemm",
        "devmem",
        "h2d",
        "nccl",
        "ib_ports",
        "train_smoke",
        "inference",
        "sdc",
    } <= set(checks)
    for name in ("host", "stream", "gemm", "train_smoke", "inference"):
        assert checks[name]["verdict"] == "pass", checks[name]
        for m in checks[name]["metrics"]:
            assert m["value"] is not None and math.isfinite(m["value"]) and m["value"] > 0, m
    names = {m["name"] for m in checks["stream"]["metrics"]}
    assert names == {"copy_gbps", "scale_gbps", "add_gbps", "triad_gbps"}
    assert {m["name"] for m in checks["gemm"]["metrics"]} >= {"fp64_tflops", "fp32_tflops"}
    assert {m["name"] for m in checks["inference"]["metrics"]} >= {
        "fp32_bs1_prefill_tokens_per_s",
        "fp32_bs4_decode_tokens_per_s",
        "fp32_bs1_ttft_ms",
        "fp32_bs4_token_p50_ms",
        "fp32_bs4_token_p99_ms",
    }
    assert checks["stream"]["log"] and checks["gemm"]["log"]


def test_gpu_checks_skip_with_reason(delivery_run):
    _, _, doc = delivery_run
    by = {r["check"]: r for r in doc["results"]}
    for name in GPU_CHECKS:
        assert by[name]["verdict"] == "skip", by[name]
        assert "GPU" in by[name]["reason"] or "CUDA" in by[name]["reason"], by[name]["reason"]
    assert "no RDMA" in by["ib_ports"]["reason"] or "ibstat" in by["ib_ports"]["reason"]


def test_results_json_metadata_and_inventory(delivery_run):
    _, run_dir, doc = delivery_run
    run = doc["run"]
    for key in ("run_id", "nvtest_version", "command_line", "started_at", "ended_at", "host", "backend", "suite"):
        assert run.get(key), key
    assert run["suite"] == "delivery" and run["backend"] == "local"
    (node,) = doc["nodes"].values()
    assert node["sku"] == "cpu-generic"
    assert node["inventory"]["cpu_model"] and node["inventory"]["memory_total_kib"] > 0
    assert doc["skus"]["cpu-generic"]["thresholds"]["stream"]["triad_gbps"]["source"]
    assert (run_dir / "results.jsonl").stat().st_size > 0
    assert (Path(run_dir).parent / "latest").resolve() == run_dir


def test_evidence_logs_exist(delivery_run):
    _, run_dir, doc = delivery_run
    for r in doc["results"]:
        if r["log"]:
            text = (run_dir / r["log"]).read_text()
            assert "# command:" in text and "===== stdout =====" in text


def test_report_html_contents(delivery_run):
    _, run_dir, doc = delivery_run
    html = (run_dir / "report.html").read_text()
    assert "Overall verdict: WARN" in html
    assert "http://" not in html and "https://" not in html  # self-contained
    for r in doc["results"]:
        assert f'id="check-{r["check"]}"' in html
    triad = next(m for r in doc["results"] if r["check"] == "stream" for m in r["metrics"] if m["name"] == "triad_gbps")
    assert f"{triad['value']:.4g} GB/s" in html
    assert 'href="logs/' in html


def test_junit_one_case_per_item(delivery_run):
    _, run_dir, doc = delivery_run
    root = ET.parse(run_dir / "junit.xml").getroot()
    cases = root.findall(".//testcase")
    assert len(cases) == len(doc["results"])
    skipped = [c for c in cases if c.find("skipped") is not None]
    assert len(skipped) == doc["summary"]["items"]["skip"]


def test_report_rerenders_from_results_json(delivery_run, tmp_path):
    _, run_dir, _ = delivery_run
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "results.json").write_text((run_dir / "results.json").read_text())
    proc = run_nvtest("report", str(copy))
    assert proc.returncode == 0, proc.stderr
    assert "Overall verdict: WARN" in (copy / "report.html").read_text()


def test_failing_threshold_exits_1(tmp_path):
    ov = tmp_path / "strict.yaml"
    ov.write_text(
        "schema_version: 1\nname: strict\nthresholds:\n"
        "  stream:\n    triad_gbps: {min: 1000000, unit: GB/s, source: impossible floor for the test}\n"
    )
    proc = run_nvtest(
        "run",
        "--suite",
        "quick",
        "-k",
        "stream",
        "--overlay",
        str(ov),
        "--out",
        str(tmp_path / "r"),
        "--progress",
        "none",
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    doc = json.loads((tmp_path / "r" / "latest" / "results.json").read_text())
    (stream,) = [r for r in doc["results"] if r["check"] == "stream"]
    assert stream["verdict"] == "fail" and "triad_gbps" in stream["reason"] and "< min" in stream["reason"]
    triad = next(m for m in stream["metrics"] if m["name"] == "triad_gbps")
    assert triad["threshold"]["origin"] == f"overlay:{ov}"


def _tagged(tag: str) -> list[str]:
    """PIDs of the processes whose environment carries ``NVTEST_TEST_TAG=tag`` (this run's
    descendants, whoever reparented them; other runs on the machine are not counted)."""
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if f"NVTEST_TEST_TAG={tag}".encode() in environ.read_bytes().split(b"\0"):
                found.append(environ.parent.name)
        except OSError:
            continue
    return found


def test_ctrl_c_keeps_results_and_exits_130(tmp_path):
    out = tmp_path / "r"
    tag = tmp_path.name
    proc = subprocess.Popen(
        [*NVTEST, "run", "--suite", "delivery", "--out", str(out), "--progress", "plain"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "NVTEST_TEST_TAG": tag},
    )
    deadline = time.monotonic() + 120
    seen = ""
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        seen += line
        if "stream[" in line:  # host and gpus and stream judged; gemm is running now
            break
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    rest, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, seen + rest
    doc = json.loads((out / "latest" / "results.json").read_text())
    assert doc["run"]["interrupted"] is True
    assert "stream" in {r["check"] for r in doc["results"]}
    assert "run interrupted" in (out / "latest" / "report.html").read_text()
    # no probe of this run left behind
    time.sleep(0.5)
    assert _tagged(tag) == []


def test_rerun_failed_runs_only_failed_items(tmp_path):
    ov = tmp_path / "strict.yaml"
    ov.write_text(
        "schema_version: 1\nname: strict\nthresholds:\n"
        "  stream:\n    triad_gbps: {min: 1000000, unit: GB/s, source: impossible floor for the test}\n"
    )
    first = run_nvtest(
        "run", "--suite", "quick", "--overlay", str(ov), "--out", str(tmp_path / "r"), "--progress", "none"
    )
    assert first.returncode == 1, first.stdout + first.stderr
    old_dir = (tmp_path / "r" / "latest").resolve()
    old = json.loads((old_dir / "results.json").read_text())
    assert {r["check"] for r in old["results"]} >= {"host", "stream", "gemm"}
    # nothing given again: the first run's overlay applies, and stream fails again
    again = run_nvtest("run", "--rerun-failed", str(old_dir), "--out", str(tmp_path / "r"), "--progress", "none")
    assert again.returncode == 1, again.stdout + again.stderr
    new_dir = (tmp_path / "r" / "latest").resolve()
    assert new_dir != old_dir
    new = json.loads((new_dir / "results.json").read_text())
    assert [r["check"] for r in new["results"]] == ["stream"]
    assert new["run"]["rerun_of"] == old["run"]["run_id"]
    assert json.loads((new_dir / "run_config.json").read_text())["overlay"] == str(ov.resolve())
    # an option given again wins: a lenient overlay, and stream passes
    lenient = tmp_path / "lenient.yaml"
    lenient.write_text(
        "schema_version: 1\nname: lenient\nthresholds:\n"
        "  stream:\n    triad_gbps: {min: 0.001, unit: GB/s, source: any floor for the test}\n"
    )
    third = run_nvtest(
        "run",
        "--rerun-failed",
        str(old_dir),
        "--overlay",
        str(lenient),
        "--out",
        str(tmp_path / "r"),
        "--progress",
        "none",
    )
    assert third.returncode == 0, third.stdout + third.stderr
