"""Over the simulated ssh cluster, for real: multi-node training and collectives under torchrun,
TCP pair bandwidth on the ring schedule, and a throttled node blamed and confirmed by re-pairing."""

from __future__ import annotations

import pytest

from tests.jobs.conftest import by_check

pytestmark = [pytest.mark.sshd, pytest.mark.slow]


def test_slow_node_is_blamed_and_confirmed(run_on_cluster):
    proc, doc = run_on_cluster(["interconnect/test_ib.py::test_tcp_bw"], slow={"sim02": 10})
    res = by_check(doc, "tcp_bw")
    assert res["sim02"]["verdict"] == "fail", res["sim02"]
    assert "known-good" in res["sim02"]["reason"]
    assert any(p["second_pass"] and p["status"] == "fail" for p in res["sim02"]["details"]["pairs"])
    for other in ("sim01", "sim03"):
        assert res[other]["verdict"] == "pass", res[other]
        assert "attributed to sim02" in res[other]["details"]["note"]
    assert proc.returncode == 1


def test_multinode_training_and_collectives_run_for_real(run_on_cluster):
    proc, doc = run_on_cluster(
        [
            "workload/test_train_multinode.py",
            "interconnect/test_collectives.py::test_collectives_multinode",
            "interconnect/test_ib.py::test_tcp_bw",
        ]
    )
    _healthy_tcp_pairs(proc, doc)
    train = by_check(doc, "train_multinode")
    assert set(train) == {"sim01", "sim02", "sim03"}, proc.stdout[-3000:] + proc.stderr[-3000:]
    for node, r in train.items():
        assert r["verdict"] == "pass", (node, r)
        assert r["details"]["world_size"] == 3
        assert r["details"]["rank_nodes"] == {"0": "sim01", "1": "sim02", "2": "sim03"}
        metrics = {m["name"]: m["value"] for m in r["metrics"]}
        assert metrics["final_loss_ratio"] < 0.9 and metrics["tokens_per_s"] > 0
    coll = by_check(doc, "collectives_multinode")
    for node, r in coll.items():
        assert r["verdict"] == "pass", (node, r)
        assert r["details"]["backend"] == "gloo" and len(r["details"]["ranks"]) == 3
        busbw = {m["name"]: m["value"] for m in r["metrics"]}
        assert set(busbw) == {
            "all_reduce_busbw_gbps",
            "all_gather_busbw_gbps",
            "reduce_scatter_busbw_gbps",
            "alltoall_busbw_gbps",
        }
        assert all(v > 0 for v in busbw.values())
    assert proc.returncode == 0, proc.stdout[-2000:]


def _healthy_tcp_pairs(proc, doc) -> None:
    res = by_check(doc, "tcp_bw")
    assert set(res) == {"sim01", "sim02", "sim03"}, proc.stdout + proc.stderr
    for node, r in res.items():
        assert r["verdict"] == "pass", (node, r)
        (m,) = [m for m in r["metrics"] if m["name"] == "tcp_gbit_s"]
        assert m["value"] > 0.05
        pairs = r["details"]["pairs"]
        assert len(pairs) == 2 and all(p["status"] == "pass" for p in pairs)  # ring: every node twice
        assert "tcp_bw_probe.py send --host 127.0.0." in "".join(p["command"] for p in pairs)
