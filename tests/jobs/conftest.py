"""Fixtures: a simulated cluster (real sshd per node on loopback) and nvtest runs over it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from nvtest.testing.sshd_cluster import SSHDCluster, sshd_unavailable_reason
from tests.conftest import PROBES, run_nvtest

PYTHON = sys.executable

#: A SKU for the simulated nodes: CPU only, a TCP floor that a throttled node misses.
SIM_SKU = {
    "schema_version": 1,
    "name": "sim-cpu",
    "description": "simulated CPU node of the test cluster",
    "match": {"gpu_count": 0},
    "expect": {"gpus": 0},
    "recipe": {
        "tcp_bw": {"seconds": 1.5, "pairs": {"schedule": "ring"}},
        "train_multinode": {"nproc_per_node": 1, "steps": 20},
        "collectives": {"nproc": 2, "sizes": "4096,262144", "iters": 3},
        "collectives_multinode": {"nproc_per_node": 1, "sizes": "65536", "iters": 2},
        "mpi": {"ranks_per_node": 1, "tcp_if_include": "lo"},
    },
    "thresholds": {
        "tcp_bw": {
            "tcp_gbit_s": {
                "min": 0.05,
                "unit": "Gb/s",
                "source": "test floor: 50 Mbit/s on loopback",
            }
        }
    },
}


@pytest.fixture(scope="session")
def sim_cluster() -> Iterator[SSHDCluster]:
    """Three simulated nodes whose probes run with this interpreter."""
    reason = sshd_unavailable_reason()
    if reason:
        pytest.skip(reason)
    with SSHDCluster(3, prefix="sim", python=PYTHON) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def sku_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("skus")
    (d / "sim-cpu.yaml").write_text(yaml.safe_dump(SIM_SKU), encoding="utf-8")
    return d


def write_inventory(cluster: SSHDCluster, path: Path, slow: dict[str, int] | None = None) -> Path:
    """The cluster's inventory, with the nodes of ``slow`` throttled to that many Mbit/s (TCP)."""
    inv = yaml.safe_load(cluster.inventory_path.read_text())
    # the simulated nodes share one /tmp: read the probes where they are (a shared file
    # system, as on most clusters) instead of copying them to the same path three times
    inv["defaults"]["probe_dir"] = str(PROBES)
    for entry in inv["nodes"]:
        rate = (slow or {}).get(entry["names"])
        if rate:
            wrapper = path.parent / f"python-{entry['names']}"
            wrapper.write_text(f'#!/bin/sh\nNVTEST_TCP_RATE_LIMIT_MBIT={rate} exec {PYTHON} "$@"\n')
            wrapper.chmod(0o755)
            entry["python"] = str(wrapper)
    path.write_text(yaml.safe_dump(inv), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def run_on_cluster(
    sim_cluster: SSHDCluster, sku_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Callable[..., tuple[subprocess.CompletedProcess[str], dict]]:
    """``run(checks, slow=None) -> (process, results.json)``: nvtest run over ssh on the cluster."""

    def run(checks: list[str], slow: dict[str, int] | None = None, timeout: float = 600):
        d = tmp_path_factory.mktemp("run")
        suite = d / "suite.yaml"
        suite.write_text(yaml.safe_dump({"name": "t", "description": "t", "checks": checks}))
        inv = write_inventory(sim_cluster, d / "inventory.yaml", slow)
        # no NVTEST_MPI_RSH_AGENT: mpirun reaches the nodes through the run's generated ssh config
        env = {"OMP_NUM_THREADS": "1"}
        proc = run_nvtest(
            "run",
            "--backend",
            "ssh",
            "--inventory",
            str(inv),
            "--insecure-host-keys",
            "--sku-dir",
            str(sku_dir),
            "--sku",
            "sim-cpu",
            "--suite",
            str(suite),
            "--out",
            str(d / "reports"),
            "--progress",
            "plain",
            timeout=timeout,
            env={**os.environ, **env},
        )
        results = d / "reports" / "latest" / "results.json"
        doc = json.loads(results.read_text()) if results.exists() else {}
        return proc, doc

    return run


def by_check(doc: dict, check: str) -> dict[str, dict]:
    """node -> result of ``check``."""
    return {r["node"]: r for r in doc.get("results", []) if r["check"] == check}
