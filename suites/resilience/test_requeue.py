"""Job-level drill under Slurm: the training job requeued with ``scontrol requeue``.

Per node, a requeueable batch job pinned to it trains one rank with
checkpoints; it pauses after a fixed step (so it cannot finish first), the
controller requeues it there and measures the time until the job runs again,
until it has reloaded its newest checkpoint and until it trains again, and the
steps lost.  All nodes' jobs run at once (one drill for the check, followed
with one ``squeue`` per poll); each node's item reads its own job's figures.

By default Slurm's hold of a requeued job (about two minutes) is measured as
part of the figures; recipe ``resilience.requeue_release_hold: true`` releases
it as soon as Slurm can relaunch the job.  ``training_again_s`` is set beside
the recipe target ``resilience.targets.requeue_training_again_s`` (none by
default).  Needs the ``slurm`` backend (skipped, with that reason, under any
other), a run directory the nodes can read and write, and nodes not held by
an ``--exclusive`` allocation (the drill's jobs run beside the run's own).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from nvtest.checks.api import Judge, NodeError, ProbeSkip
from nvtest.checks.resilience.recipe import resilience_recipe
from nvtest.checks.resilience.requeue import (
    DrillSpec,
    RequeueFigures,
    judge_requeue,
    run_requeue_drills,
)
from nvtest.config.resources import probes_dir
from nvtest.config.thresholds import SkuProfile
from nvtest.jobs.base import check_nodes, fleet_cache, profile_of, require_up
from nvtest.session.phase import path_part

if TYPE_CHECKING:
    from nvtest.session.context import RunContext

#: Drill ports start here, one per node (the test cluster's nodes share one host).
BASE_PORT = 29650


def _drills(ctx: RunContext) -> dict[str, RequeueFigures | NodeError]:
    """Every node's drill, all at once (the check's first item runs it; the others wait)."""
    nodes = check_nodes(ctx, "requeue")
    index = {name: i for i, name in enumerate(sorted(n.name for n in ctx.nodes))}
    specs = []
    for n in nodes:
        rec = resilience_recipe(profile_of(ctx, n))
        specs.append(
            DrillSpec(
                node=n.name,
                python=n.python,
                probe_dir=ctx.probe_dirs.get(n.name, str(probes_dir())),
                workdir=ctx.run_dir / "requeue" / path_part(n.name),
                steps=int(rec["steps"]) + 10,
                ckpt_every=int(rec["ckpt_every"]),
                requeue_step=int(rec["ckpt_every"]) + 2,
                port=BASE_PORT + index[n.name],
                release_hold=bool(rec["requeue_release_hold"]),
            )
        )
    timeout = 600 * ctx.config.timeout_scale
    return run_requeue_drills(
        specs, timeout_s=timeout, sbatch_options=ctx.transport.side_job_options(timeout)
    )


@pytest.mark.check("requeue", area="resilience", title="Slurm job requeued and resumed")
def test_requeue(node, nvtest_context, judge: Judge, sku: SkuProfile | None) -> None:
    ctx = nvtest_context
    if ctx.config.backend != "slurm":
        pytest.skip(f"needs the slurm backend (this run: {ctx.config.backend})")
    require_up(ctx, node)
    if ctx.transport.holds_nodes_exclusively:
        raise ProbeSkip(
            "the run's allocation holds the nodes exclusively (--exclusive): the drill's own "
            "batch jobs could not start beside it; run the requeue check without --exclusive"
        )
    rec = resilience_recipe(sku)
    result = fleet_cache(ctx).get("requeue", lambda: _drills(ctx)).get(node.name)
    if result is None:
        judge.fail(f"no requeue drill ran on {node.name}")
        return
    if isinstance(result, NodeError):
        judge.fail(str(result))
        return
    judge_requeue(
        judge,
        result,
        rec["targets"].get("requeue_training_again_s"),
        hold_released=bool(rec.get("requeue_release_hold")),
    )
