"""The real Slurm cluster of the ``slurm``-marked tests: munged, slurmctld and two
``slurmd -N`` (node1, node2, partition ``nvt``) on this machine, one for the tests/slurm package.

The tests skip, saying why, only when Slurm's daemons are not installed (the
Debian packages ``munge`` and ``slurm-wlm``) or when not run as root; a
cluster that is installed but does not start is an error.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator

import pytest

from nvtest.testing.slurm_cluster import SlurmCluster
from tests.conftest import started_slurm_cluster


@pytest.fixture(scope="package")
def slurm_cluster() -> Iterator[SlurmCluster]:
    with started_slurm_cluster(activate=True) as cluster:
        yield cluster


@pytest.fixture
def cluster(slurm_cluster: SlurmCluster) -> Iterator[SlurmCluster]:
    """The session cluster; after each test, no job is left and every node is resumed."""
    yield slurm_cluster
    slurm_cluster.client("scancel", "--user=root")
    for node in slurm_cluster.nodes:
        slurm_cluster.client("scontrol", "update", f"nodename={node}", "state=resume")
    wait_for(lambda: not slurm_cluster.client("squeue", "-h").stdout.strip(), 20, "the queue to empty")


def wait_for(cond: Callable[[], object], timeout_s: float, what: str) -> None:
    """Poll ``cond`` every 0.1 s until true; fail the test after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")


def squeue(cluster: SlurmCluster, *args: str) -> str:
    return cluster.client("squeue", "-h", *args).stdout


def run(cluster: SlurmCluster, *argv: str) -> subprocess.CompletedProcess[str]:
    proc = cluster.client(*argv)
    assert proc.returncode == 0, proc.stderr
    return proc
