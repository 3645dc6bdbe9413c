"""TCP pair bandwidth over the simulated ssh cluster: the schedule runs for real, and a
throttled node is blamed and confirmed by re-pairing, its partners cleared."""

from __future__ import annotations

import pytest

from tests.interconnect.conftest import by_check

pytestmark = [pytest.mark.sshd, pytest.mark.slow]


def test_tcp_pairs_pass_on_healthy_nodes(run_on_cluster):
    proc, doc = run_on_cluster(["interconnect/test_ib.py::test_tcp_bw"])
    res = by_check(doc, "tcp_bw")
    assert set(res) == {"sim01", "sim02", "sim03"}, proc.stdout + proc.stderr
    for node, r in res.items():
        assert r["verdict"] == "pass", (node, r)
        (m,) = [m for m in r["metrics"] if m["name"] == "tcp_gbit_s"]
        assert m["value"] > 0.05
        pairs = r["details"]["pairs"]
        assert len(pairs) == 2 and all(
            p["status"] == "pass" for p in pairs
        )  # ring: every node twice
        assert "tcp_bw_probe.py send --host 127.0.0." in "".join(p["command"] for p in pairs)
    assert proc.returncode == 0


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
