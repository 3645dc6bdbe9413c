"""SDC probe: the same bits every run, a flipped bit seen, what determines the bits reported."""

from __future__ import annotations

import pytest

FAST = ("--device", "cpu", "--dtypes", "fp32,bf16", "--size", "64", "--chain", "4", "--steps", "2", "--threads", "1")


@pytest.fixture(scope="module")
def runs(probe):
    clean = probe("sdc_probe.py", *FAST, timeout=300).doc
    flipped = probe("sdc_probe.py", *FAST, env={"NVTEST_SDC_INJECT": "cpu"}, timeout=300).doc
    return clean, flipped


def _digests(doc: dict) -> dict[tuple[str, str], str]:
    (r,) = doc["results"]
    return {(w["name"], w["dtype"]): w["digest"] for w in r["workloads"]}


def test_every_workload_is_digested_with_its_parameters(runs):
    clean, _ = runs
    assert clean["status"] == "ok" and clean["device"] == "cpu"
    (r,) = clean["results"]
    assert [(w["name"], w["dtype"]) for w in r["workloads"]] == [
        ("gemm_chain", "fp32"),
        ("gemm_chain", "bf16"),
        ("train_smoke", "fp32"),
    ]
    gemm = r["workloads"][0]
    assert (gemm["size"], gemm["chain"], gemm["finite"]) == (64, 4, True)
    assert r["workloads"][2]["steps"] == 2
    assert all(len(w["digest"]) == 64 for w in r["workloads"])  # sha256 hex
    assert clean["recipe"] == {
        "dtypes": ["fp32", "bf16"],
        "size": 64,
        "chain": 4,
        "steps": 2,
        "seed": 20240611,
        "threads": 1,
    }


def test_the_config_names_what_determines_the_bits_on_a_cpu(runs):
    (r,) = runs[0]["results"]
    c = r["config"]
    assert c["device_kind"] == "cpu" and c["threads"] == 1 and c["deterministic"] is True
    assert c["cpu_capability"] and c["torch"] and c["cpu_model"]


def test_a_flipped_bit_changes_only_the_gemm_digests(runs):
    clean, flipped = runs
    a, b = _digests(clean), _digests(flipped)
    assert a[("gemm_chain", "fp32")] != b[("gemm_chain", "fp32")]
    assert a[("gemm_chain", "bf16")] != b[("gemm_chain", "bf16")]
    # the training steps ran again in another process and gave the same bits
    assert a[("train_smoke", "fp32")] == b[("train_smoke", "fp32")]


def test_usage_error_is_an_error_document(probe):
    run = probe("sdc_probe.py", "--device", "cpu", "--dtypes", "fp7", "--chain", "0")
    assert run.doc["status"] == "error" and "usage error" in run.doc["reason"]
