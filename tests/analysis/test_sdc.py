"""SDC grouping and majority on synthetic digests: the odd GPU named, ties, groups of one,
a whole group differing from another (a configuration difference, not corruption)."""

from __future__ import annotations

from nvtest.analysis.postprocess import post_process
from nvtest.analysis.sdc import compare, digests_from_docs, run_warnings
from nvtest.verdict import Verdict

H100 = {
    "device_kind": "cuda",
    "gpu_name": "NVIDIA H100 80GB HBM3",
    "driver": "550.54.15",
    "cuda": "12.4",
    "cudnn": "90100",
    "torch": "2.13.0",
}
GEMM = {"name": "gemm_chain", "dtype": "bf16", "size": 4096, "chain": 16, "seed": 1, "digest": ""}


def gpu(i: int, digest: str, config: dict | None = None, serial: str | None = None) -> dict:
    return {
        "device": f"cuda:{i}",
        "index": i,
        "serial": serial or f"16549220{i:05d}",
        "config": config or H100,
        "workloads": [{**GEMM, "digest": digest}],
        "status": "ok",
    }


def fleet(spec: dict[str, list[dict]]) -> dict[str, dict]:
    return {node: {"status": "ok", "results": gpus} for node, gpus in spec.items()}


def verdicts(report) -> dict[tuple[str, str], Verdict]:
    return {(f.digest.node, f.digest.device): f.verdict for f in report.findings}


def test_the_gpu_that_differs_from_the_majority_is_named_with_node_index_and_serial():
    docs = fleet({"n1": [gpu(0, "a"), gpu(1, "a")], "n2": [gpu(0, "a"), gpu(1, "b", serial="SN-BAD")]})
    report = compare(digests_from_docs(docs))
    v = verdicts(report)
    assert v[("n2", "cuda:1")] is Verdict.FAIL
    assert [k for k, x in v.items() if x is not Verdict.PASS] == [("n2", "cuda:1")]
    (bad,) = [f for f in report.findings if f.verdict is Verdict.FAIL]
    assert "outputs differ from 3 other GPUs of the same configuration: silent data corruption suspected" in bad.reason
    assert "n2 cuda:1 (index 1, serial SN-BAD)" in bad.reason and "gemm_chain bf16" in bad.reason
    good = [f for f in report.findings if f.verdict is Verdict.PASS]
    assert all(f.agreeing == 2 and f.compared == 3 for f in good)
    assert report.config_differences == []


def test_a_gpu_wrong_the_same_way_on_every_run_is_found_only_against_its_peers():
    # the bad GPU's digest is stable (its own repetition check would pass) but not its peers'
    docs = fleet({f"n{i}": [gpu(0, "good")] for i in range(5)})
    docs["n3"]["results"] = [gpu(0, "stable-but-wrong")]
    v = verdicts(compare(digests_from_docs(docs)))
    assert v[("n3", "cuda:0")] is Verdict.FAIL and sum(x is Verdict.FAIL for x in v.values()) == 1


def test_no_majority_fails_every_gpu_of_the_group():
    two = compare(digests_from_docs(fleet({"n1": [gpu(0, "a")], "n2": [gpu(0, "b")]})))
    assert set(verdicts(two).values()) == {Verdict.FAIL}
    assert all("no majority among the 2 GPUs" in f.reason and "split 1/1" in f.reason for f in two.findings)
    tie = compare(digests_from_docs(fleet({"n1": [gpu(0, "a"), gpu(1, "a")], "n2": [gpu(0, "b"), gpu(1, "b")]})))
    assert set(verdicts(tie).values()) == {Verdict.FAIL}
    assert "split 2/2" in tie.findings[0].reason


def test_a_group_of_one_warns_that_nothing_could_be_compared():
    l40s = {**H100, "gpu_name": "NVIDIA L40S"}
    report = compare(digests_from_docs(fleet({"n1": [gpu(0, "a"), gpu(1, "a")], "n2": [gpu(0, "z", l40s)]})))
    v = verdicts(report)
    assert v[("n2", "cuda:0")] is Verdict.WARN and v[("n1", "cuda:0")] is Verdict.PASS
    (warn,) = [f for f in report.findings if f.verdict is Verdict.WARN]
    assert "the only GPU of its configuration in this run, nothing could be compared" in warn.reason


def test_a_whole_group_differing_from_another_is_a_configuration_difference_not_corruption():
    newer = {**H100, "driver": "560.35.03", "cuda": "12.6"}
    docs = fleet(
        {
            "n1": [gpu(0, "a"), gpu(1, "a")],
            "n2": [gpu(0, "a"), gpu(1, "a")],
            "n3": [gpu(0, "b", newer), gpu(1, "b", newer)],
        }
    )
    report = compare(digests_from_docs(docs))
    assert set(verdicts(report).values()) == {Verdict.PASS}
    (line,) = report.config_differences
    assert line.startswith("gemm_chain bf16: ")
    assert "4 GPUs (n1, n2) and 2 GPUs (n3) give different outputs" in line
    assert "cuda 12.4 vs 12.6" in line and "driver 550.54.15 vs 560.35.03" in line
    assert "a configuration difference, not corruption" in line and "gpu_name" not in line


def test_groups_on_different_configurations_that_agree_are_not_reported():
    newer = {**H100, "driver": "560.35.03"}
    docs = fleet({"n1": [gpu(0, "a"), gpu(1, "a")], "n2": [gpu(0, "a", newer), gpu(1, "a", newer)]})
    assert compare(digests_from_docs(docs)).config_differences == []


def test_dtype_and_shape_are_part_of_the_group():
    docs = fleet({"n1": [gpu(0, "a"), gpu(1, "a")]})
    docs["n2"] = {
        "status": "ok",
        "results": [
            {**gpu(0, "x"), "workloads": [{**GEMM, "size": 2048, "digest": "x"}]},
            {**gpu(1, "x"), "workloads": [{**GEMM, "size": 2048, "digest": "x"}]},
        ],
    }
    report = compare(digests_from_docs(docs))
    assert set(verdicts(report).values()) == {Verdict.PASS} and len(report.groups) == 2


def test_a_gpu_whose_probe_failed_is_an_error_and_not_counted():
    docs = fleet(
        {
            "n1": [gpu(0, "a"), gpu(1, "a")],
            "n2": [
                gpu(0, "a"),
                {"device": "cuda:1", "status": "error", "reason": "CUDA error: an illegal memory access"},
            ],
        }
    )
    report = compare(digests_from_docs(docs))
    v = verdicts(report)
    assert v[("n2", "cuda:1")] is Verdict.ERROR
    assert all(f.compared == 2 for f in report.findings if f.verdict is Verdict.PASS)
    err = [f for f in report.findings if f.verdict is Verdict.ERROR][0]
    assert "illegal memory access" in err.reason


def test_config_differences_become_one_run_warning_each():
    newer = {**H100, "cuda": "12.6"}
    report = compare(
        digests_from_docs(fleet({"n1": [gpu(0, "a"), gpu(1, "a")], "n2": [gpu(0, "b", newer), gpu(1, "b", newer)]}))
    )
    details = {"sdc": {"config_differences": report.config_differences}}
    results = [
        {"check": "sdc", "node": n, "verdict": "pass", "reason": "", "metrics": [], "details": details}
        for n in ("n1", "n2")
    ]
    assert run_warnings(results) == [f"sdc: {report.config_differences[0]}"]
    doc = {
        "run": {"warnings": ["operator note"]},
        "nodes": {"n1": {"sku": None}, "n2": {"sku": None}},
        "results": results,
    }
    post_process(doc, policies={})
    post_process(doc, policies={})  # idempotent
    assert doc["run"]["warnings"] == ["operator note", f"sdc: {report.config_differences[0]}"]


def test_on_a_cpu_fleet_the_messages_name_cpus():
    cpu = {
        "device": "cpu",
        "index": None,
        "serial": None,
        "status": "ok",
        "config": {"device_kind": "cpu", "cpu_model": "AMD EPYC", "threads": 1},
        "workloads": [{**GEMM, "dtype": "fp32", "digest": "a"}],
    }
    report = compare(digests_from_docs(fleet({"n1": [cpu]})))
    (f,) = report.findings
    assert f.verdict is Verdict.WARN and "on n1 cpu (serial unknown): the only CPU of its configuration" in f.reason
