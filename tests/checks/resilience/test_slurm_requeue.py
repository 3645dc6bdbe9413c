"""The job-level drill on a real Slurm (munge, slurmctld, two slurmd on this machine): a requeued
training job runs again, resumes from its newest checkpoint and finishes.  Slurm's hold of a
requeued job (about two minutes) is released as soon as Slurm can relaunch it, to keep the test short."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator

import pytest
import yaml

from nvtest.checks.resilience.requeue import run_requeue_drill
from nvtest.report.model import fmt_num
from nvtest.testing.slurm_cluster import SlurmCluster
from tests.checks.resilience.conftest import PROBES, by_check, metrics, tiny_sku
from tests.conftest import run_nvtest, started_slurm_cluster
from tests.transports.helpers import free_port

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


@pytest.fixture(scope="module")
def cluster() -> Iterator[SlurmCluster]:
    with started_slurm_cluster(activate=True) as sim:
        yield sim


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
        poll_s=0.25,
        port=free_port(),  # not the drill's default: other runs on this host may hold it
    )
    assert fig.completed, fig
    # the job holds after step 6 until the requeue lands: it resumes from step 4, 2 steps lost
    assert fig.resumed_from_step == 4 and fig.steps_lost == 2, fig
    assert fig.running_again_s is not None and 0 < fig.running_again_s < fig.resumed_s < fig.training_s
    assert fig.restarts == 1, fig
    # released in neither the second of the requeue nor the next one (Slurm's credential revocation)
    assert fig.hold_released_s is not None and 1.0 <= fig.hold_released_s < fig.running_again_s, fig


def test_requeue_check_through_the_cli_on_both_nodes_at_once(cluster, tmp_path):
    """``nvtest run --backend slurm`` of a suite holding only the requeue check: both nodes'
    jobs run at once, each node's item passes with the figures in results.json and the report."""
    sku = tiny_sku(tmp_path)
    sku["recipe"]["resilience"]["requeue_release_hold"] = True
    sku["recipe"]["resilience"]["requeue_port"] = free_port()  # others on this host may hold 29650
    # a target far above what the test can take, from no published figure: the test's own
    sku["recipe"]["resilience"]["targets"] = {"requeue_training_again_s": 300}
    (tmp_path / "skus").mkdir()
    (tmp_path / "skus" / "resil-cpu.yaml").write_text(yaml.safe_dump(sku))
    suite = tmp_path / "suite.yaml"
    suite.write_text(yaml.safe_dump({"name": "rq", "description": "rq", "checks": ["resilience/test_requeue.py"]}))
    inv = tmp_path / "inventory.yaml"
    inv.write_text(f"cluster: sim\ndefaults: {{python: {sys.executable}}}\nnodes:\n  - names: node[1-2]\n")
    proc = run_nvtest(
        "run",
        "--backend",
        "slurm",
        "--partition",
        "nvt",
        "--time",
        "15",
        "--inventory",
        str(inv),
        "--sku-dir",
        str(tmp_path / "skus"),
        "--sku",
        "resil-cpu",
        "--suite",
        str(suite),
        "--out",
        str(tmp_path / "reports"),
        "--progress",
        "plain",
        env={**cluster.env, "OMP_NUM_THREADS": "1"},
        timeout=900,
    )
    out = proc.stdout[-3000:] + proc.stderr[-3000:]
    run_dir = (tmp_path / "reports" / "latest").resolve()
    doc = json.loads((run_dir / "results.json").read_text())
    res = by_check(doc, "requeue")
    assert set(res) == {"node1", "node2"}, out
    spans = {}
    for node, r in res.items():
        assert r["verdict"] == "pass", (node, r["reason"], r["details"].get("requeue"))
        m = metrics(r)
        assert 0 < m["running_again_s"] < m["resumed_s"] < m["training_again_s"] < 300, (node, m)
        # requeued after step ckpt_every + 2 = 6 while holding there: resumes from step 4
        assert m["steps_lost"] == 2, (node, m)
        rq = r["details"]["requeue"]
        assert rq["node"] == node and rq["restarts"] == 1 and rq["completed"] and rq["release_hold"]
        tgt = r["details"]["training_again_s_target"]
        assert tgt["target_s"] == 300 and tgt["within"] is True
        events = [
            json.loads(line)
            for line in (run_dir / "requeue" / node / "events" / "rank0.jsonl").read_text().splitlines()
        ]
        spans[node] = (events[0]["t"], events[-1]["t"])  # first start .. last event (done)
    # the two jobs ran at once, not one after the other
    assert spans["node1"][0] < spans["node2"][1] and spans["node2"][0] < spans["node1"][1], spans
    assert proc.returncode == 0, out
    html = (run_dir / "report.html").read_text()
    assert "training_again_s" in html and "running_again_s" in html and "steps_lost" in html
    for r in res.values():
        assert fmt_num(metrics(r)["training_again_s"]) in html
