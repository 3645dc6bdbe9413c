"""End to end over a cluster of real sshd nodes, each a stand-in HGX H100 (nvtest/testing/standin_nodes.py):
two healthy, one whose driver is not loaded, one with an HCA missing, one whose HCAs are named
differently. Rule 1: the faulty node fails with the tool's words, the others pass. Rule 4: the
golden shape of the HCAs is the fleet's majority (3 of 5), shown as such, and the odd nodes
fail ``ib_ports`` with the difference spelled out; rule 6: each is diagnosed by its cause.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from nvtest.testing.sshd_cluster import SSHDCluster, sshd_unavailable_reason
from nvtest.testing.standin_nodes import install
from tests.conftest import run_nvtest

pytestmark = [pytest.mark.sshd, pytest.mark.slow]

#: node -> its profile.
LAYOUT = {
    "gpu01": "h100_healthy",
    "gpu02": "h100_healthy",
    "gpu03": "h100_driver_down",
    "gpu04": "h100_hca_missing",
    "gpu05": "h100_hca_renamed",
}
CHECKS = "gpus or driver_stack or ecc or ib_ports or fabric_manager"


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Iterator[tuple[int, dict[tuple[str, str], dict], str]]:
    reason = sshd_unavailable_reason()
    if reason:
        print(f"skipping: {reason}")
        pytest.skip(reason)
    tmp = tmp_path_factory.mktemp("fleet")
    env = {n: {"PATH": install(p, tmp / f"bin-{n}").path_prefix()} for n, p in LAYOUT.items()}
    with SSHDCluster(len(LAYOUT), prefix="gpu", python=sys.executable, node_env=env) as cluster:
        assert cluster.names == sorted(LAYOUT)
        proc = run_nvtest(
            "run",
            "--backend",
            "ssh",
            "--inventory",
            str(cluster.inventory_path),
            "--suite",
            "delivery",
            "-k",
            CHECKS,
            "--out",
            str(tmp / "r"),
            "--progress",
            "none",
            env={"HOME": str(cluster.client_home())},
            timeout=600,
        )
    text = proc.stdout[-3000:] + proc.stderr[-3000:]
    results = Path(tmp / "r" / "latest" / "results.json")
    assert results.exists(), text
    doc = json.loads(results.read_text())
    yield proc.returncode, {(r["check"], r["node"]): r for r in doc["results"]}, text


def test_only_the_faulty_nodes_fail(run):
    code, by, text = run
    assert code == 1, text
    for check in ("gpus", "driver_stack", "ecc", "fabric_manager", "ib_ports"):
        for node in ("gpu01", "gpu02"):
            assert by[(check, node)]["verdict"] == "pass", by[(check, node)]
    for check in ("gpus", "driver_stack", "ecc"):
        r = by[(check, "gpu03")]
        assert r["verdict"] == "fail" and "couldn't communicate with the NVIDIA driver" in r["reason"], r
        assert r["diagnosis"]["rule"] == "driver_not_loaded", r
    for node in ("gpu04", "gpu05"):
        assert by[("gpus", node)]["verdict"] == "pass"


def test_the_golden_hca_shape_is_the_fleets_majority_and_says_so(run):
    _, by, _ = run
    missing = by[("ib_ports", "gpu04")]
    assert missing["verdict"] == "fail", missing
    assert "HCA mlx5_3 missing" in missing["reason"]
    assert "fleet majority: 3 of 5 nodes of SKU h100-sxm-80gb" in missing["reason"]
    assert missing["diagnosis"]["rule"] == "hca_missing", missing
    renamed = by[("ib_ports", "gpu05")]
    assert renamed["verdict"] == "fail"
    whole = (renamed.get("details") or {}).get("reason_full") or renamed["reason"]  # the reason is one line
    assert "HCA mlx5_9 not in the golden shape" in whole and "HCA mlx5_1 missing" in renamed["reason"]
    assert renamed["diagnosis"]["rule"] == "hca_renamed", renamed
    shape = by[("ib_ports", "gpu01")]["details"]["shape"]["hcas"]
    assert shape["origin"] == "fleet majority: 3 of 5 nodes of SKU h100-sxm-80gb"
    assert [h[0] for h in shape["golden"]] == [f"mlx5_{i}" for i in range(8)]
    assert [h[0] for h in by[("ib_ports", "gpu04")]["details"]["shape"]["hcas"]["node"]] == [
        f"mlx5_{i}" for i in (0, 1, 2, 4, 5, 6, 7)
    ]


def test_the_bus_shape_is_the_same_on_every_node(run):
    _, by, _ = run
    for node in LAYOUT:
        shape = by[("gpus", node)]["details"]["shape"]["gpu_pci"]
        assert shape["origin"] == "fleet majority: 5 of 5 nodes of SKU h100-sxm-80gb"
        assert len(shape["node"]) == 8
