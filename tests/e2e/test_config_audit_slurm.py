"""End to end: ``container_identity`` under the real test Slurm.

pyxis and enroot are not on this machine, so no image is started here. What is
exercised: the identity launch as the run's multi-node jobs launch (one srun step, one
rank per GPU or one per node, block layout), every rank's identity line, and the
judgement per node. The "container" is simulated honestly by what the check reads: the
test cluster's ``TaskProlog`` gives the tasks on ``node1`` the variable an image sets
(``NVTEST_IMAGE_ID``) and gives ``node2`` nothing, as a node without the container
plugin runs its ranks on the bare host. What is not exercised: pyxis starting an image;
``--container-image`` on a Slurm without pyxis is refused by srun, and that refusal is
what the second test shows.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from nvtest.testing.slurm_cluster import SlurmCluster, missing_slurm_binaries
from tests.conftest import run_nvtest_on_slurm

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


@pytest.fixture(scope="module")
def cluster() -> Iterator[SlurmCluster]:
    missing = missing_slurm_binaries()
    reason = (
        f"Slurm is not installed ({', '.join(missing)} missing)"
        if missing
        else None
        if os.geteuid() == 0
        else "the Slurm test cluster runs its daemons as root"
    )
    if reason:
        print(f"skipping: {reason}")
        pytest.skip(reason)
    with SlurmCluster(nodes=("node1", "node2"), partition="nvt", task_env={"node1": {"NVTEST_IMAGE_ID": "img-7"}}) as c:
        yield c


def test_a_rank_without_the_image_marker_fails_its_node(cluster, tmp_path):
    proc, doc, tail = run_nvtest_on_slurm(
        cluster,
        tmp_path,
        "--nodes",
        "node[1-2]",
        "--suite",
        "config",
        "-k",
        "container_identity",
        "--image-id",
        "img-7",
        timeout=600,
    )
    assert doc is not None, tail
    r = {x["node"]: x for x in doc["results"] if x["check"] == "container_identity"}
    assert r["node1"]["verdict"] == "pass", r["node1"]
    assert r["node1"]["details"]["ranks"] == [
        {"rank": 0, "node": "node1", "image": "img-7", "source": "env:NVTEST_IMAGE_ID"}
    ]
    assert r["node2"]["verdict"] == "fail", r["node2"]
    assert "rank 1 on node2 ran on the host" in r["node2"]["reason"] and r["node2"]["diagnosis"]["class"] == "CONFIG"
    assert proc.returncode == 1, tail
    log = (tmp_path / "latest" / r["node2"]["log"]).read_text()
    assert "srun" in log and "nvtest-rank rank=1 node=node2 image=-" in log


def test_container_image_on_a_slurm_without_pyxis_is_srun_s_refusal(cluster, tmp_path):
    proc, doc, tail = run_nvtest_on_slurm(
        cluster,
        tmp_path,
        "--nodes",
        "node[1-2]",
        "--suite",
        "config",
        "-k",
        "container_identity",
        "--container-image",
        "nvcr.io#nvidia/pytorch:24.05-py3",
        timeout=600,
    )
    assert doc is not None, tail
    r = [x for x in doc["results"] if x["check"] == "container_identity"]
    assert r and all(x["verdict"] == "error" for x in r), r
    assert "container-image" in r[0]["reason"], r[0]["reason"]
