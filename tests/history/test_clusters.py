"""A node is known by (cluster, node): two clusters that both have ``node1`` never share a
record, "since the last run" compares a node with its own cluster's past, the report says
which history and which cluster; a database of the previous schema keeps its rows. On
SQLite and on the real PostgreSQL server (``db_url``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nvtest.history import LATEST, HistoryStore
from nvtest.history import queries as q
from nvtest.history.annotate import record_run
from nvtest.history.cluster import cluster_of_run, run_cluster, slurm_conf_cluster_name
from nvtest.ops.gate.engine import gate_cluster
from nvtest.ops.gate.history import record_gate
from nvtest.report.history import history_view

T0 = 1741608000.0


def doc(run_id: str, cluster: str, t: float, tflops: float, verdict: str = "pass") -> dict[str, Any]:
    """A results.json of one node ``node1`` of ``cluster``: gemm at ``tflops``."""
    return {
        "schema_version": 1,
        "run": {
            "run_id": run_id,
            "started_at": t,
            "ended_at": t + 60,
            "host": "login1",
            "backend": "ssh",
            "cluster": cluster,
            "history_cluster": cluster,
            "history_cluster_source": "inventory",
        },
        "summary": {"verdict": verdict},
        "nodes": {"node1": {"name": "node1", "sku": "h100-sxm-80gb"}},
        "results": [
            {
                "check": "gemm",
                "node": "node1",
                "verdict": verdict,
                "reason": "",
                "started_at": t + 1,
                "metrics": [{"name": "bf16_tflops", "value": tflops, "unit": "TFLOP/s", "labels": {"gpu": "0"}}],
            }
        ],
    }


def test_two_clusters_with_node1_stay_apart(db_url: str) -> None:
    with HistoryStore(db_url) as store:
        record_run(store, doc("east1", "east", T0, 700.0))
        record_run(store, doc("west1", "west", T0 + 100, 400.0, "fail"))
        store.record_event("node1", "drain", "west's node1 drained", t=T0 + 150, cluster="west")
        later = doc("east2", "east", T0 + 200, 690.0)
        record_run(store, later)
        hist = later["history"]
        assert hist["cluster"] == "east" and hist["database"] == store.display_url
        prev = hist["nodes"]["node1"]
        assert prev["previous_run"] == "run:east1"  # not west's node1, though it ran since
        assert prev["drained_before"] is None  # west's drain is not east's
        assert prev["checks"]["gemm"]["metrics"][0]["before"] == 700.0
        assert q.node_clusters(store, "node1") == ["east", "west"]
        east = q.timeline(store, "node1", cluster="east")
        assert [e.key for e in east] == ["run:east1", "run:east2"]
        assert [e.kind for e in q.timeline(store, "node1", cluster="west")] == ["run", "drain"]
        mixed = [e for e in q.timeline(store, "node1") if e.kind == "run"]  # no cluster: all
        assert [e.cluster for e in mixed] == ["east", "west", "east"]
        assert not any(e.moved for e in mixed), "west's 400 was compared with east's 700"
        assert {s.latest for s in q.trend(store, "gemm", "bf16_tflops", cluster="west")} == {400.0}
        east_now = q.latest_per_node(store, cluster="east")  # the exporter's question, per cluster
        assert [(x.node, x.checks["gemm"][0], x.checks["gemm"][3][0][2]) for x in east_now] == [
            ("node1", "pass", 690.0)
        ]
        # a gate on west's node1 (its cluster from Slurm) is west's record
        gate = {
            "node": "node1",
            "cluster": "west",
            "started_at": T0 + 300,
            "duration_s": 1.0,
            "mode": "manual",
            "verdict": "fail",
            "checks": [{"check": "xid", "verdict": "fail", "reason": "Xid 79"}],
        }
        record_gate(gate, db_url)
        east_latest = q.previous_runs(store, ["node1"], before=T0 + 400, kinds=("gate",), cluster="east")
        west_latest = q.previous_runs(store, ["node1"], before=T0 + 400, kinds=("gate",), cluster="west")
        assert "node1" not in east_latest or east_latest["node1"].key is None
        assert west_latest["node1"].key == f"gate:west/node1:{T0 + 300:.6f}"
    view = history_view(later)
    assert view is not None and view.cluster == "east" and view.database


def test_repeat_offenders_are_per_cluster(db_url: str) -> None:
    with HistoryStore(db_url) as store:
        for day in range(3):  # east's node1 fails on three days; west's node1 on one
            record_run(store, doc(f"e{day}", "east", T0 + day * 86400, 500.0, "fail"))
        record_run(store, doc("w0", "west", T0, 500.0, "fail"))
        got = q.lemons(store, min_days=3, window_days=7, now=T0 + 3 * 86400)
    assert [(x.cluster, x.node, x.days) for x in got] == [("east", "node1", 3)]


def _v2_rows(url: str) -> None:
    """A database as nvtest wrote it at schema version 2 (no cluster columns)."""
    from tests.history.conftest import old_database

    old_database(
        url,
        2,
        "node1",
        "pass",
        T0,
        "INSERT INTO events (node, at, day, kind, reason, source) VALUES (:n, :t, :d, 'drain', 'old drain', 'admin')",
    )


def test_a_version_2_database_keeps_its_rows(db_url: str) -> None:
    _v2_rows(db_url)
    with HistoryStore(db_url) as store:
        assert (store.migrated_from, store.version) == (2, LATEST)
        old = q.timeline(store, "node1", cluster="")
        assert [(e.kind, e.key) for e in old] == [("run", "run:old"), ("drain", None)]
        assert q.node_clusters(store, "node1") == [""]
        later = doc("east1", "east", T0 + 100, 700.0)
        record_run(store, later)  # a named cluster's run is never compared with rows of no cluster
        assert later["history"]["nodes"] == {}
        assert q.node_clusters(store, "node1") == ["", "east"]


def test_where_a_run_s_cluster_comes_from(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base = {"slurm_cluster": None, "backend": "ssh", "inventory_file": "/x/rack07.yaml", "host": "ctl"}
    assert run_cluster(**{**base, "inventory_cluster": "east", "slurm_cluster": "nvtest"}) == ("east", "inventory")
    assert run_cluster(**{**base, "inventory_cluster": None, "slurm_cluster": "nvtest"}) == ("nvtest", "slurm")
    assert run_cluster(**{**base, "inventory_cluster": None}) == ("inventory:rack07", "stated")
    assert run_cluster(**{**base, "inventory_cluster": None, "backend": "local"}) == ("local:ctl", "stated")
    assert run_cluster(**{**base, "inventory_cluster": None, "inventory_file": None}) == ("controller:ctl", "stated")
    # a results.json from before clusters were stated: derived the same way
    assert cluster_of_run({"backend": "local", "host": "ctl.example.org"}) == "local:ctl"
    assert cluster_of_run({"history_cluster": "west", "cluster": "east"}) == "west"
    conf = tmp_path / "slurm.conf"
    conf.write_text("# site\nClusterName=gpu-west\nSlurmctldHost=ctl\n")
    assert slurm_conf_cluster_name(conf) == "gpu-west"
    assert slurm_conf_cluster_name(tmp_path / "absent.conf") is None
    monkeypatch.setenv("SLURM_CONF", str(conf))
    monkeypatch.delenv("SLURM_CLUSTER_NAME", raising=False)
    assert gate_cluster("given", "node1") == "given"
    assert gate_cluster(None, "node1") == "gpu-west"
    monkeypatch.setenv("SLURM_CLUSTER_NAME", "from-hook")
    assert gate_cluster(None, "node1") == "from-hook"
    monkeypatch.delenv("SLURM_CLUSTER_NAME")
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "absent.conf"))
    assert gate_cluster(None, "node1") == "local:node1"
