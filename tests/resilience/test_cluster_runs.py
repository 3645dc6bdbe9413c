"""Over the simulated ssh cluster (a real sshd per node on loopback): the checkpoint tiers on every
node at once, with the shared tier's aggregate over all nodes, and the in-process restart drill."""

from __future__ import annotations

import json
import os
import sys

import pytest
import yaml

from nvtest.testing.sshd_cluster import SSHDCluster, sshd_unavailable_reason
from tests.conftest import run_nvtest
from tests.interconnect.conftest import write_inventory
from tests.resilience.conftest import by_check, metrics, tiny_sku

pytestmark = [pytest.mark.sshd, pytest.mark.slow]


@pytest.fixture(scope="module")
def cluster_run(tmp_path_factory):
    reason = sshd_unavailable_reason()
    if reason:
        pytest.skip(reason)
    d = tmp_path_factory.mktemp("resil-ssh")
    sku = tiny_sku(d)
    sku["recipe"]["ckpt"]["shared_path"] = str(d / "shared")
    (d / "skus").mkdir()
    (d / "skus" / "resil-cpu.yaml").write_text(yaml.safe_dump(sku))
    suite = d / "suite.yaml"
    suite.write_text(
        yaml.safe_dump(
            {
                "name": "r",
                "description": "r",
                "checks": ["resilience/test_ckpt_tiers.py::test_ckpt_shared"],
            }
        )
    )
    with SSHDCluster(2, prefix="res", python=sys.executable) as cluster:
        inv = write_inventory(cluster, d / "inventory.yaml")
        proc = run_nvtest(
            "run",
            "--backend",
            "ssh",
            "--inventory",
            str(inv),
            "--insecure-host-keys",
            "--sku-dir",
            str(d / "skus"),
            "--sku",
            "resil-cpu",
            "--suite",
            str(suite),
            "--out",
            str(d / "reports"),
            "--progress",
            "plain",
            env={**os.environ, "OMP_NUM_THREADS": "1"},
            timeout=600,
        )
    doc = json.loads((d / "reports" / "latest" / "results.json").read_text())
    return proc, doc


def test_shared_tier_all_nodes_at_once_with_aggregate(cluster_run):
    proc, doc = cluster_run
    res = by_check(doc, "ckpt_shared")
    assert set(res) == {"res01", "res02"}, proc.stdout[-2000:] + proc.stderr[-2000:]
    spans = []
    for node, r in res.items():
        assert r["verdict"] == "pass", (node, r)
        m = metrics(r)
        assert (
            m["write_gbps"] > 0 and m["aggregate_write_gbps"] > 0 and m["aggregate_read_gbps"] > 0
        )
        agg = r["details"]["aggregate"]
        assert agg["nodes"] == 2 and agg["bytes"] == 2 * 8 * 2**20 and not agg["left_out"]
        spans.append(agg["write_span_s"])
    assert spans[0] == spans[1]  # one aggregate for the fleet, the same on every item
    assert proc.returncode == 0, proc.stdout[-2000:]
