"""The ``mpi`` check over the simulated ssh cluster, for real: mpirun on sim01 reaches the other
nodes, whose names resolve nowhere, through the run's generated ssh config (the inventory's
address and port), one item per node with the rank -> node map; a node whose ranks cannot
start is failed and named, the others errored."""

from __future__ import annotations

import copy
import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from nvtest.testing.sshd_cluster import SSHDCluster
from tests.conftest import run_nvtest
from tests.jobs.conftest import PYTHON, SIM_SKU, by_check, write_inventory

pytestmark = [pytest.mark.sshd, pytest.mark.slow]


def _run(
    cluster: SSHDCluster, d: Path, broken_python: str | None = None
) -> tuple[subprocess.CompletedProcess[str], dict]:
    sku = copy.deepcopy(SIM_SKU)
    sku["recipe"]["mpi"] = {
        "ranks_per_node": 1,
        "tcp_if_include": "lo",
        "sizes": "8192,131072",
        "iters": 2,
        "barriers": 20,
        "timeout_s": 240,
    }
    (d / "skus").mkdir()
    (d / "skus" / "sim-cpu.yaml").write_text(yaml.safe_dump(sku))
    suite = d / "suite.yaml"
    suite.write_text(yaml.safe_dump({"name": "t", "description": "t", "checks": ["interconnect/test_mpi.py"]}))
    inv = write_inventory(cluster, d / "inventory.yaml")
    if broken_python:
        # the node's Python runs the inventory probe, but the MPI probe's executable is missing
        wrapper = d / f"python-{broken_python}"
        wrapper.write_text(
            f'#!/bin/sh\ncase "$*" in *mpi_probe.py*) exec /nonexistent/python3 "$@";; esac\nexec {PYTHON} "$@"\n'
        )
        wrapper.chmod(0o755)
        data = yaml.safe_load(inv.read_text())
        for entry in data["nodes"]:
            if entry["names"] == broken_python:
                entry["python"] = str(wrapper)
        inv.write_text(yaml.safe_dump(data))
    # no NVTEST_MPI_RSH_AGENT: the node names reach the nodes through the run's generated
    # ssh config (the inventory's addresses and ports), as on a cluster without DNS for them
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
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
        "sim-cpu",
        "--suite",
        str(suite),
        "--out",
        str(d / "reports"),
        "--progress",
        "plain",
        timeout=500,
        env=env,
    )
    results = d / "reports" / "latest" / "results.json"
    return proc, json.loads(results.read_text()) if results.exists() else {}


def test_mpi_over_three_nodes_maps_every_rank(sim_cluster: SSHDCluster, tmp_path: Path) -> None:
    proc, doc = _run(sim_cluster, tmp_path)
    res = by_check(doc, "mpi")
    assert set(res) == {"sim01", "sim02", "sim03"}, proc.stdout[-3000:] + proc.stderr[-3000:]
    for i, (node, r) in enumerate(sorted(res.items())):
        assert r["verdict"] == "pass", (node, r)
        d = r["details"]
        assert d["launcher"] == "mpirun" and d["world_size"] == 3
        assert d["rank_nodes"] == {"0": "sim01", "1": "sim02", "2": "sim03"}
        assert d["node_ranks"] == [i]
        assert "--host sim02:1" in d["command"] and "plm_rsh_args '-F /tmp/nvtest-" in d["command"]
        metrics = {m["name"]: m for m in r["metrics"]}
        assert metrics["barrier_latency_us"]["unit"] == "us"
        assert metrics["barrier_latency_us"]["value"] > 0
        busbw = metrics["allreduce_busbw_gbps"]
        assert busbw["value"] > 0 and busbw["labels"] == {"size_bytes": "131072"}
        top = max(d["results"], key=lambda x: x["size_bytes"])  # busbw = algbw * 2 (n-1)/n
        assert busbw["value"] == pytest.approx(top["algbw_gbps"] * 4 / 3)
        assert all(x["wrong"] == 0 for x in d["results"])
    assert proc.returncode == 0, proc.stdout[-2000:]


def test_node_that_cannot_start_its_ranks_is_named(sim_cluster: SSHDCluster, tmp_path: Path) -> None:
    proc, doc = _run(sim_cluster, tmp_path, broken_python="sim02")
    res = by_check(doc, "mpi")
    assert set(res) == {"sim01", "sim02", "sim03"}, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert res["sim02"]["verdict"] == "fail", res["sim02"]
    assert "ranks could not start on sim02" in res["sim02"]["reason"]
    log = tmp_path / "reports" / "latest" / res["sim02"]["log"]  # the first mpirun, on sim01
    assert "/nonexistent/python3" in log.read_text()
    for node in ("sim01", "sim03"):  # measured by the rerun without sim02
        assert res[node]["verdict"] == "pass", res[node]
        d = res[node]["details"]
        assert d["world_size"] == 2 and set(d["rank_nodes"].values()) == {"sim01", "sim03"}
        assert list(d["left_out"]) == ["sim02"], d
        assert "/nonexistent/python3" not in d["command"]
    assert proc.returncode == 1
