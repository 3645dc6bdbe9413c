"""The job-level drill on a real Slurm (munge, slurmctld, two slurmd on this machine): a requeued
training job runs again, resumes from its newest checkpoint and finishes.  Slurm's hold of a
requeued job (about two minutes) is released at once here, to keep the test short."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from nvtest.resilience.requeue import run_requeue_drill
from nvtest.testing.slurm_cluster import SlurmCluster
from tests.conftest import started_slurm_cluster
from tests.resilience.conftest import PROBES

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


@pytest.fixture(scope="module")
def cluster() -> Iterator[SlurmCluster]:
    with started_slurm_cluster(activate=True) as sim:
        yield sim



@pytest.mark.xfail(
    strict=False,
    reason=(
        "known intermittent on the single-host test cluster: after `scontrol requeue` and "
        "`scontrol update StartTime=now` the job sometimes leaves squeue without a second "
        "incarnation (seen in 2 of 4 runs); the drill's figures are then incomplete"
    ),
)
def test_requeued_job_runs_again_and_resumes(cluster, tmp_path):
    fig = run_requeue_drill(
        "node2",
        sys.executable,
        str(PROBES),
        tmp_path / "requeue",
        steps=24,
        ckpt_every=4,
        requeue_step=6,
        step_s=0.25,
        timeout_s=400,
        release_hold=True,
    )
    assert fig.completed, fig
    assert fig.resumed_from_step == 4 or fig.resumed_from_step == 8, fig
    assert (
        fig.running_again_s is not None and 0 < fig.running_again_s < fig.resumed_s < fig.training_s
    )
    assert 0 <= fig.steps_lost <= 4 + 1
