"""Job-level drill under Slurm: the training job requeued with ``scontrol requeue``.

Per node, a requeueable batch job pinned to it trains one rank with
checkpoints; at a fixed step the controller requeues it and measures the time
until the job runs again, until it has reloaded its newest checkpoint and until
it trains again, and the steps lost.  Needs the ``slurm`` backend (skipped, with
that reason, under any other) and a run directory the nodes can read and write.
"""

from __future__ import annotations

import pytest

from nvtest.check import Judge
from nvtest.resilience.recipe import resilience_recipe
from nvtest.resilience.requeue import run_requeue_drill
from nvtest.resources import probes_dir
from nvtest.thresholds import SkuProfile


@pytest.mark.check("requeue", area="resilience", title="Slurm job requeued and resumed")
def test_requeue(node, nvtest_context, judge: Judge, sku: SkuProfile | None) -> None:
    if nvtest_context.config.backend != "slurm":
        pytest.skip(f"needs the slurm backend (this run: {nvtest_context.config.backend})")
    rec = resilience_recipe(sku)
    workdir = nvtest_context.run_dir / "requeue" / node.name
    probe_dir = nvtest_context.probe_dirs.get(node.name, str(probes_dir()))
    port = 29650 + sorted(n.name for n in nvtest_context.nodes).index(node.name)
    try:
        fig = run_requeue_drill(
            node.name,
            node.python,
            probe_dir,
            workdir,
            steps=int(rec["steps"]) + 10,
            ckpt_every=int(rec["ckpt_every"]),
            requeue_step=int(rec["ckpt_every"]) + 2,
            port=port,
            timeout_s=600 * nvtest_context.config.timeout_scale,
        )
    except RuntimeError as exc:
        judge.fail(str(exc))
        return
    judge("running_again_s", fig.running_again_s, "s")
    judge("resumed_s", fig.resumed_s, "s")
    judge("training_again_s", fig.training_s, "s")
    judge("steps_lost", fig.steps_lost, "steps")
    judge.detail("requeue", fig.to_json())
    if fig.resumed_from_step is None:
        judge.fail(f"job {fig.job_id} did not resume from a checkpoint after the requeue")
    if not fig.completed:
        judge.fail(f"job {fig.job_id} did not finish after the requeue (state {fig.final_state})")
