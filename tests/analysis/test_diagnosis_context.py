"""The run's diagnoses use what the run knows: the tool's log, the node's other results, the fleet.

post_process (as finish_run calls it) reads the tail of each failing result's log under the
run directory and gives each diagnosis the same node's other results; "systemic" needs three
or more nodes of the SKU and never overrides a cause the node's own evidence names.
"""

from __future__ import annotations

import os
from pathlib import Path

from nvtest.analysis.outliers import FleetPolicy
from nvtest.analysis.postprocess import EVIDENCE_TAIL_BYTES, evidence_tail, post_process

SKU = "h100-sxm-80gb"
MTU_LINE = (
    "ubuntu20-server-2:94639:94647 [0] transport/net_ib.cc:100 NCCL WARN NET/IB : mlx5_0:1 Got async event : "
    "local access violation work queue error\n"
)


def _doc(nodes: list[str], extra: list[dict] | None = None) -> dict:
    results = [
        {
            "check": "nccl",
            "node": n,
            "verdict": "fail",
            "reason": "all_reduce busbw 95.1 GB/s < min 360 GB/s",
            "cause": "threshold:below_floor",
            "metrics": [],
            "log": f"logs/{n}/nccl.log",
        }
        for n in nodes
    ]
    return {
        "schema_version": 1,
        "run": {"warnings": []},
        "nodes": {n: {"name": n, "sku": SKU} for n in nodes},
        "skus": {SKU: {}},
        "results": results + (extra or []),
        "summary": {},
    }


def _rule(doc: dict, node: str, check: str = "nccl") -> str:
    return next(r for r in doc["results"] if r["node"] == node and r["check"] == check)["diagnosis"]["rule"]


POLICY = {SKU: FleetPolicy()}


def test_two_nodes_failing_alike_are_not_systemic():
    doc = post_process(_doc(["n1", "n2"]), policies=POLICY)
    assert doc["fleet"]["systemic"] == [] and _rule(doc, "n1") == "below_floor"
    doc = post_process(_doc(["n1", "n2", "n3"]), policies=POLICY)
    assert len(doc["fleet"]["systemic"]) == 1 and _rule(doc, "n1") == "systemic"


def test_the_tools_log_and_the_nodes_config_beat_the_fleet(tmp_path: Path):
    acs = {
        "check": "pcie_acs",
        "node": "n2",
        "verdict": "fail",
        "metrics": [],
        "reason": "ACS redirect enabled on 0000:15:00.0 (ReqRedir+ CmpltRedir+)",
    }
    doc = _doc(["n1", "n2", "n3"], [acs])
    log = tmp_path / "logs/n1/nccl.log"
    log.parent.mkdir(parents=True)
    log.write_text("x" * (2 * EVIDENCE_TAIL_BYTES) + MTU_LINE)
    post_process(doc, policies=POLICY, run_dir=tmp_path)
    assert doc["fleet"]["systemic"]  # every node fails nccl ...
    assert _rule(doc, "n1") == "ib_mtu_mismatch"  # ... but n1's NCCL named the cause
    assert _rule(doc, "n2") == "node_pcie_acs"  # ... and n2's own audit did
    assert _rule(doc, "n3") == "systemic"
    assert _rule(doc, "n2", "pcie_acs") == "config_pcie_acs"


def test_evidence_is_read_only_from_regular_files(tmp_path: Path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run.log").write_text(MTU_LINE)
    os.mkfifo(tmp_path / "fifo.log")  # a FIFO in a log's place must not block the analysis
    assert evidence_tail(tmp_path, "fifo.log") == ""
    assert evidence_tail(tmp_path, "missing.log") == "" and evidence_tail(tmp_path, "run") == ""
    assert evidence_tail(None, "x.log") == "" and evidence_tail(tmp_path, None) == ""
    # a re-judged copy (nvtest evaluate) points at the logs of the run it came from
    assert evidence_tail(tmp_path / "run", "../run.log") == MTU_LINE
