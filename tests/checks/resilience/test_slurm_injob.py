"""The resilience checks under a real Slurm (munge, slurmctld, two ``slurmd -N`` nodes on this
machine), in one ``nvtest run --backend slurm``: the checkpoint tiers measure and verify on both
nodes (the shared tier at once, with its aggregate); the in-job restart drill runs as ONE job
whose ranks span node1 and node2, kills one rank, and both nodes' ranks come back from the
checkpoint on the same trajectory; a rank slowed on node2 only is its one straggler.

Each node's launcher starts in the same srun step (one command per node, dispatched on
``SLURMD_NODENAME``), as the multi-node training check does. Both nodes are this machine, so
the inventory gives them the address 127.0.0.1. The checkpoints go to ``ckpt.shared_path``
(rank 0 writes, every rank reads), the other scope than the ssh test's node-local copies.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from nvtest.testing.slurm_cluster import SlurmCluster
from tests.checks.resilience.conftest import by_check, metrics, tiny_sku
from tests.checks.resilience.test_cluster_runs import (
    OVERSUBSCRIBED_MIN_SCORE,
    assert_one_straggler,
    assert_span_drill,
)
from tests.conftest import run_nvtest_on_slurm, started_slurm_cluster

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


@pytest.fixture(scope="module")
def cluster() -> Iterator[SlurmCluster]:
    with started_slurm_cluster() as sim:
        yield sim


def test_resilience_checks_under_slurm(cluster: SlurmCluster, tmp_path: Path) -> None:
    sku = tiny_sku(tmp_path)
    (tmp_path / "shared").mkdir()  # a declared shared path must exist (an unmounted one is not created)
    sku["recipe"]["ckpt"]["shared_path"] = str(tmp_path / "shared")
    sku["recipe"]["resilience"]["targets"] = {"injob_recovery_s": 600}  # a busy 2-core machine
    sku["recipe"]["resilience"]["straggler_min_score"] = OVERSUBSCRIBED_MIN_SCORE
    skus = tmp_path / "skus"
    skus.mkdir()
    (skus / "resil-cpu.yaml").write_text(yaml.safe_dump(sku))
    suite = tmp_path / "suite.yaml"
    suite.write_text(
        yaml.safe_dump(
            {
                "name": "r",
                "description": "r",
                "checks": [
                    "resilience/test_ckpt_tiers.py",
                    "resilience/test_restart.py::test_restart_injob",
                    "resilience/test_stragglers.py",
                ],
            }
        )
    )
    inv = tmp_path / "inventory.yaml"
    inv.write_text(
        f"cluster: sim\ndefaults: {{python: {sys.executable}, address: 127.0.0.1}}\nnodes:\n  - names: node[1-2]\n"
    )
    proc, doc, out = run_nvtest_on_slurm(
        cluster,
        tmp_path / "out",
        "--suite",
        str(suite),
        "--inventory",
        str(inv),
        "--sku-dir",
        str(skus),
        "--sku",
        "resil-cpu",
        env={"NVTEST_STRAGGLER_INJECT": "node2/1:0.3"},
    )
    assert doc is not None, out
    res = by_check(doc, "restart_injob")
    assert set(res) == {"node1", "node2"}, out
    assert_span_drill(res, {"node1", "node2"}, nproc=2, ckpt_every=4)
    for r in res.values():
        assert r["details"]["job"]["ckpt"]["scope"] == "job"
    assert not any((tmp_path / "shared").iterdir()), "the job's checkpoints were left behind"
    for check in ("ckpt_mem", "ckpt_local", "ckpt_shared"):
        tiers = by_check(doc, check)
        assert set(tiers) == {"node1", "node2"}, (check, out)
        for r in tiers.values():
            assert r["verdict"] == "pass", r
            m = metrics(r)
            assert m["write_gbps"] > 0 and m["read_gbps"] > 0, r
            assert r["details"]["tier"]["checksum"].startswith("crc32:"), r
    for r in by_check(doc, "ckpt_shared").values():
        agg = r["details"]["aggregate"]
        assert agg["nodes"] == 2 and not agg["left_out"], agg
    assert_one_straggler(by_check(doc, "straggler"), slow_node="node2")
    assert proc.returncode == 1, out  # the injected straggler fails its item, nothing else
