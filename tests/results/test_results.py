"""The append-only store and results.json assembly."""

from __future__ import annotations

from pathlib import Path

import pytest

from nvtest.analysis.finish import finish_run
from nvtest.errors import ConfigError
from nvtest.results import (
    CheckResult,
    MetricResult,
    ResultStore,
    assemble,
    load_results,
)
from nvtest.verdict import Verdict


def _result(check: str, node: str, verdict: Verdict, t: float = 0.0) -> CheckResult:
    return CheckResult(
        check=check,
        node=node,
        verdict=verdict,
        metrics=(MetricResult("triad_gbps", 10.0, "GB/s", verdict),),
        started_at=t,
    )


def test_each_result_is_on_disk_at_once(tmp_path: Path):
    store = ResultStore(tmp_path)
    store.append("run", {"run_id": "r1", "started_at": 1.0})
    store.result(_result("stream", "n1", Verdict.PASS))
    # not closed: a crash now must lose nothing already appended
    lines = (tmp_path / "results.jsonl").read_text().splitlines()
    assert len(lines) == 2 and '"stream"' in lines[1]
    store.close()


def test_assemble_counts_and_worst_verdict(tmp_path: Path):
    store = ResultStore(tmp_path)
    store.append("run", {"run_id": "r1", "started_at": 1.0})
    store.append("node", {"name": "n1"})
    store.append("node", {"name": "n2"})
    store.result(_result("stream", "n1", Verdict.PASS, 1))
    store.result(_result("gemm", "n1", Verdict.WARN, 2))
    store.result(_result("stream", "n2", Verdict.FAIL, 3))
    store.result(_result("gemm", "n2", Verdict.ERROR, 4))
    store.append("end", {"ended_at": 11.0, "interrupted": False})
    store.close()
    doc = assemble(tmp_path / "results.jsonl")
    assert doc["schema_version"] == 1
    assert doc["nodes"]["n1"]["verdict"] == "warn"
    assert doc["nodes"]["n2"]["verdict"] == "fail"
    assert doc["summary"]["verdict"] == "fail"
    assert doc["summary"]["items"] == {"pass": 1, "warn": 1, "fail": 1, "error": 1, "skip": 0}
    assert doc["run"]["duration_s"] == 10.0


def test_torn_last_line_and_rerun_replacement(tmp_path: Path):
    store = ResultStore(tmp_path)
    store.result(_result("stream", "n1", Verdict.FAIL, 1))
    store.result(_result("stream", "n1", Verdict.PASS, 2))
    store.close()
    with (tmp_path / "results.jsonl").open("a") as fh:
        fh.write('{"kind": "result", "check": "gemm", "no')  # crash mid-write
    doc = finish_run(tmp_path).doc
    assert [(r["check"], r["verdict"]) for r in doc["results"]] == [("stream", "pass")]
    assert load_results(tmp_path)["summary"]["verdict"] == "pass"


def test_interrupted_run_nodes_with_nothing_measured_are_errors(tmp_path: Path):
    store = ResultStore(tmp_path)
    store.append("run", {"run_id": "r1", "started_at": 1.0})
    for name in ("n1", "n2", "n3"):
        store.append("node", {"name": name})
    store.result(_result("stream", "n1", Verdict.PASS, 1))
    store.append("end", {"ended_at": 5.0, "interrupted": True, "interrupt_signal": "SIGINT"})
    store.close()
    doc = assemble(tmp_path / "results.jsonl")
    assert doc["nodes"]["n1"]["verdict"] == "pass" and "unmeasured_reason" not in doc["nodes"]["n1"]
    for name in ("n2", "n3"):
        assert doc["nodes"][name]["verdict"] == "error"
        assert doc["nodes"][name]["unmeasured_reason"].startswith("nothing measured: ")
    assert doc["summary"]["nodes"]["error"] == 2 and doc["summary"]["nodes"]["skip"] == 0
    assert doc["summary"]["verdict"] == "error" and doc["summary"]["incomplete"]


def test_finished_run_node_without_results_stays_skip(tmp_path: Path):
    store = ResultStore(tmp_path)
    store.append("run", {"run_id": "r1", "started_at": 1.0})
    store.append("node", {"name": "n1"})
    store.append("end", {"ended_at": 5.0, "interrupted": False})
    store.close()
    assert assemble(tmp_path / "results.jsonl")["nodes"]["n1"]["verdict"] == "skip"


def test_a_run_without_results_json_says_how_to_rebuild_it_from_its_jsonl(tmp_path: Path):
    with pytest.raises(ConfigError) as ei:
        load_results(tmp_path)
    assert "nvtest report" not in str(ei.value)  # nothing to rebuild from
    (tmp_path / "results.jsonl").write_text("")  # a run whose disk filled before results.json
    with pytest.raises(ConfigError) as ei:
        load_results(tmp_path)
    assert ei.value.exit_code == 2 and f"rebuild it with: nvtest report {tmp_path}" in str(ei.value)
