"""The multi-node fabric checks under a real Slurm (two ``slurmd -N`` nodes, node1 and node2, on
this machine): ``nvtest run --backend slurm --suite fabric`` gives real verdicts for the gloo
collectives under torchrun, the multi-node training smoke run, the TCP pair test and MPI.

Both nodes are this machine and their Slurm names resolve nowhere: the inventory names them
only, and the rendezvous and the pair tests use the address Slurm gives them (``NodeAddr``
127.0.0.1, from ``scontrol show node``); MPI starts as mpirun inside the allocation (Debian's Open MPI has
no PMI-2 client, and ``srun --mpi=pmix`` cannot run two slurmd of one host: both create the
same ``/tmp/spmix_appdir_<uid>_<job>.<step>``).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from nvtest.config import resources
from nvtest.testing.slurm_cluster import SlurmCluster
from tests.conftest import run_nvtest_on_slurm, started_slurm_cluster
from tests.jobs.conftest import by_check

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

CHECKS = "collectives_multinode or train_multinode or tcp_bw or mpi"


@pytest.fixture(scope="module")
def cluster() -> Iterator[SlurmCluster]:
    with started_slurm_cluster() as sim:
        yield sim


def _sku_dir(tmp_path: Path) -> Path:
    """cpu-generic with shorter recipes (the checks' paths are the same, the runs shorter)."""
    sku = yaml.safe_load((resources.configs_dir() / "skus" / "cpu-generic.yaml").read_text())
    sku.update(name="slurm-sim-cpu", description="cpu-generic, short recipes for the test cluster")
    sku["recipe"].update(
        collectives_multinode={"nproc_per_node": 1, "sizes": "65536", "iters": 2},
        train_multinode={"nproc_per_node": 1, "steps": 15},
        tcp_bw={"seconds": 1, "pairs": {"schedule": "ring"}},
        mpi={"sizes": "8192,262144", "iters": 2, "barriers": 20},
    )
    d = tmp_path / "skus"
    d.mkdir()
    (d / "slurm-sim-cpu.yaml").write_text(yaml.safe_dump(sku))
    return d


def test_fabric_suite_under_slurm(cluster: SlurmCluster, tmp_path: Path) -> None:
    inv = tmp_path / "inventory.yaml"
    inv.write_text(f"cluster: sim\ndefaults: {{python: {sys.executable}}}\nnodes:\n  - names: node[1-2]\n")
    proc, doc, out = run_nvtest_on_slurm(
        cluster,
        tmp_path / "out",
        "--suite",
        "fabric",
        "-k",
        CHECKS,
        "--inventory",
        str(inv),
        "--sku-dir",
        str(_sku_dir(tmp_path)),
        "--sku",
        "slurm-sim-cpu",
    )
    assert doc is not None, out
    nodes = {"node1", "node2"}

    coll = by_check(doc, "collectives_multinode")
    assert set(coll) == nodes, out
    for node, r in coll.items():
        assert r["verdict"] == "pass", (node, r)
        assert r["details"]["backend"] == "gloo" and r["details"]["rank_nodes"] == {
            "0": "node1",
            "1": "node2",
        }

    train = by_check(doc, "train_multinode")
    for node, r in train.items():
        assert r["verdict"] == "pass", (node, r)
        assert r["details"]["world_size"] == 2
    assert set(train) == nodes

    tcp = by_check(doc, "tcp_bw")
    for node, r in tcp.items():
        assert r["verdict"] == "pass", (node, r)
        assert [p["status"] for p in r["details"]["pairs"]] == ["pass"]  # ring of two: one pair
    assert set(tcp) == nodes

    mpi = by_check(doc, "mpi")
    for node, r in mpi.items():
        assert r["verdict"] == "pass", (node, r)
        assert r["details"]["launcher"] == "mpirun-in-allocation"
        assert r["details"]["rank_nodes"] == {"0": "node1", "1": "node2"}  # from SLURMD_NODENAME
        assert {m["name"] for m in r["metrics"]} == {"barrier_latency_us", "allreduce_busbw_gbps"}
    assert set(mpi) == nodes
    assert proc.returncode == 0, out
