"""Fleet outliers, systemic failures, diagnosis and the post-run analysis on synthetic fleets."""

from __future__ import annotations

import copy
import random

from nvtest.analysis.outliers import FleetPolicy
from nvtest.analysis.postprocess import post_process
from nvtest.playbook.diagnosis import diagnose

THR = {"min": 660, "unit": "TFLOP/s", "source": "test"}


def _doc(values: dict[str, float], floor: float = 660) -> dict:
    results, nodes = [], {}
    for node, v in values.items():
        verdict = "pass" if v >= floor else "fail"
        reason = "" if verdict == "pass" else f"bf16_tflops[device=cuda:0]: {v:.4g} TFLOP/s < min {floor:.4g} TFLOP/s"
        m = {
            "name": "bf16_tflops",
            "value": v,
            "unit": "TFLOP/s",
            "verdict": verdict,
            "reason": f"{v:.4g} TFLOP/s >= {floor}" if verdict == "pass" else reason.split(": ", 1)[1],
            "threshold": THR,
            "labels": {"device": "cuda:0", "library": "torch"},
            "fleet": None,
        }
        result = {"check": "gemm", "node": node, "verdict": verdict, "reason": reason, "metrics": [m]}
        if verdict == "fail":  # the Judge's key of a value outside its threshold
            result["cause"] = "threshold:below_floor"
        results.append(result)
        nodes[node] = {"name": node, "sku": "h100-sxm-80gb"}
    return {
        "schema_version": 1,
        "run": {"warnings": []},
        "nodes": nodes,
        "skus": {"h100-sxm-80gb": {}},
        "results": results,
        "summary": {},
    }


def _fleet(n: int = 64, slow: dict[int, float] | None = None) -> dict[str, float]:
    rng = random.Random(7)
    vals = {f"gpu{i:03d}": 730.0 * (1 + rng.uniform(-0.01, 0.01)) for i in range(n)}
    for i, factor in (slow or {}).items():
        vals[f"gpu{i:03d}"] *= factor
    return vals


POLICY = {"h100-sxm-80gb": FleetPolicy()}


def test_one_slow_node_among_64_is_flagged_and_only_it():
    doc = post_process(_doc(_fleet(slow={17: 0.90})), policies=POLICY)
    flagged = {o["node"] for o in doc["fleet"]["outliers"]}
    assert flagged == {"gpu017"}
    r = next(r for r in doc["results"] if r["node"] == "gpu017")
    assert r["verdict"] == "warn" and "% below the fleet median" in r["reason"]
    assert "than the fleet median" not in r["reason"]
    f = r["metrics"][0]["fleet"]
    assert f["outlier"] and f["delta_pct"] < -8 and f["robust_z"] < -3.5 and f["n"] == 64
    assert doc["nodes"]["gpu017"]["verdict"] == "warn" and doc["nodes"]["gpu016"]["verdict"] == "pass"
    assert doc["summary"]["verdict"] == "warn" and doc["summary"]["nodes"]["warn"] == 1
    assert all(r["metrics"][0]["fleet"] is not None for r in doc["results"])
    assert not doc["fleet"]["systemic"]


def test_fail_only_when_configured():
    doc = post_process(_doc(_fleet(slow={3: 0.90})), policies={"h100-sxm-80gb": FleetPolicy(fail_below_pct=8)})
    assert next(r for r in doc["results"] if r["node"] == "gpu003")["verdict"] == "fail"
    assert doc["summary"]["verdict"] == "fail"


def test_small_groups_and_noise_are_not_outliers():
    doc = post_process(_doc(_fleet(n=2, slow={1: 0.5})), policies=POLICY)
    assert doc["fleet"]["outliers"] == []
    doc = post_process(_doc(_fleet(n=64, slow={5: 0.995})), policies=POLICY)
    assert doc["fleet"]["outliers"] == []


def test_all_slow_fleet_is_systemic_not_hardware():
    doc = post_process(_doc(_fleet(n=16, slow={i: 0.8 for i in range(16)})), policies=POLICY)
    (sys,) = doc["fleet"]["systemic"]
    assert sys["check"] == "gemm" and sys["metrics"] == ["bf16_tflops"] and len(sys["nodes"]) == 16
    assert any(
        w.startswith("systemic: every one of the 16 h100-sxm-80gb nodes fails gemm") for w in doc["run"]["warnings"]
    )
    assert all(r["diagnosis"]["class"] == "CONFIG" and r["diagnosis"]["rule"] == "systemic" for r in doc["results"])


def test_one_failing_node_gets_a_hardware_diagnosis_not_systemic():
    doc = post_process(_doc(_fleet(n=8, slow={2: 0.8})), policies=POLICY)
    assert doc["fleet"]["systemic"] == []
    r = next(r for r in doc["results"] if r["node"] == "gpu002")
    assert r["verdict"] == "fail" and r["diagnosis"]["rule"] == "below_floor"


def test_post_process_is_idempotent():
    once = post_process(_doc(_fleet(slow={17: 0.9})), policies=POLICY)
    twice = post_process(copy.deepcopy(once), policies=POLICY)
    assert twice["results"] == once["results"] and twice["run"]["warnings"] == once["run"]["warnings"]


def _diag(check: str, reason: str, verdict: str = "fail", cause: str | None = None) -> str | None:
    """The action class of a result; ``cause``: the key the check that writes ``reason`` sets."""
    d = diagnose({"check": check, "verdict": verdict, "reason": reason, "cause": cause})
    return d.cls if d else None


def test_diagnosis_catalog():
    assert _diag("ecc", "GPU 0 (x): row remap pending (4 uncorrectable): reset the GPU", cause="ecc:remap_pending") == (
        "RESET"
    )
    assert _diag("ecc", "GPU 0 (x): row remapping failure (spare rows exhausted): RMA", cause="ecc:remap_failure") == (
        "RMA"
    )
    assert _diag("xid_scan", "GPU 0000:3b:00 fell off the bus (Xid 79): Drain") == "REBOOT"
    assert _diag("xid_scan", "GPU 0000:3b:00: Xid 119 GSP RPC timeout: Drain") == "FIRMWARE"
    assert _diag("xid_scan", "GPU 0000:3b:00: Xid 64 ECC page retirement failure") == "RMA"
    assert (
        _diag("pcie_link", "GPU 0000:18:00.0: trained x8, both ends can do x16", cause="pcie:downgraded") == "CABLING"
    )
    assert _diag("nvlink", "GPU3: links 3,5 inactive (expects all 6 active)", cause="nvlink:inactive") == "RESET"
    assert _diag("ib_ports", "mlx5_10 port 1: Down/Polling: no link partner") == "CABLING"
    assert _diag("ib_ports", "mlx5_7 port 1: Down/LinkUp: link trained, not activated") == "CONFIG"
    assert _diag("gemm", "ProbeError: CUDA error 802: system not yet initialized", "error") == "CONFIG"
    assert (
        _diag(
            "nccl",
            "Cuda failure 'CUDA driver version is insufficient for CUDA runtime version'",
            "error",
        )
        == "CONFIG"
    )
    assert _diag("gpus", "Failed to initialize NVML: Driver/library version mismatch", "error") == "REBOOT"
    assert _diag("nccl", "all_reduce: #wrong = 123 (sizes 1048576): wrong results", cause="results:wrong") == "RMA"
    assert _diag("thermal", "cuda:0: hardware throttling under load (hw_slowdown 12 s)", cause="clocks:throttled") == (
        "MONITOR"
    )
    assert _diag("stream", "NodeError: node unreachable: ssh exited 255", "error") == "RETEST"
    assert _diag("dcgm_diag", "CommandTimeout: timed out after 3600 s", "error") == "RETEST"
    assert _diag("sw_uniformity", "vbios: n2 has 96.00.74, 7 of 8 nodes have 96.00.89", cause="drift:firmware") == (
        "FIRMWARE"
    )
    assert (
        _diag("sw_uniformity", "nccl_net_plugin: n11 has (missing), 5 of 6 nodes have /opt/x", cause="drift:software")
        == "CONFIG"
    )
    assert diagnose({"check": "gemm", "verdict": "pass", "reason": ""}) is None
    d = diagnose(
        {
            "check": "xid_scan",
            "verdict": "fail",
            "reason": "GPU 0000:3b:00: Xid 74 NVLink error: check",
        }
    )
    assert d is not None and "NVLink" in d.cause


def test_an_implausible_value_is_left_out_of_the_fleet():
    doc = _doc({f"gpu{i:03d}": 730.0 + i for i in range(4)})
    bad = doc["results"][3]
    bad["verdict"], bad["reason"] = "fail", "the tool reported a failure; bf16_tflops: implausible"
    bad["metrics"][0].update(
        value=1.0e6,
        verdict="error",
        reason="implausible: 1e+06 TFLOP/s > 1088 TFLOP/s",
        bound={"rule": "gemm", "min": 0.0, "max": 1088.34, "implausible": True},
    )
    doc = post_process(doc, policies=POLICY)
    assert bad["metrics"][0]["fleet"] is None and bad["metrics"][0]["verdict"] == "error"
    medians = {r["metrics"][0]["fleet"]["median"] for r in doc["results"][:3]}
    assert medians == {731.0} and {r["metrics"][0]["fleet"]["n"] for r in doc["results"][:3]} == {3}


def test_a_slow_time_is_the_outlier_not_a_fast_one():
    """Which way is better is the metric catalog's (lower_is_better of the unit): among step
    times (s), the node 20 % slower is flagged, the one 20 % faster is not; a count has no
    better direction and is not judged against the fleet."""
    doc = _doc(_fleet(slow={3: 1.2, 5: 0.8}), floor=0)
    for r in doc["results"]:
        m = r["metrics"][0]
        m.update(name="step_time_s", unit="s", threshold=None, reason="")
        r["metrics"].append(
            {
                "name": "wrong",
                "value": 7.0 if r["node"] == "gpu009" else 0.0,
                "unit": "count",
                "verdict": "pass",
                "labels": {},
            }
        )
    doc = post_process(doc, policies=POLICY)
    assert {o["node"] for o in doc["fleet"]["outliers"]} == {"gpu003"}
    r = next(r for r in doc["results"] if r["node"] == "gpu003")
    assert "slower than the fleet median" in r["reason"]
    assert all(r["metrics"][1].get("fleet") is None for r in doc["results"])
