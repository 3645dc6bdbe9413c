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

The check is :func:`nvtest.checks.resilience.requeue.drill`.
"""

from __future__ import annotations

import pytest

from nvtest.checks.api import Fleet, Judge, Node, SkuProfile
from nvtest.checks.resilience import requeue


@pytest.mark.check("requeue", area="resilience", title="Slurm job requeued and resumed")
def test_requeue(node: Node, fleet: Fleet, judge: Judge, sku: SkuProfile | None) -> None:
    requeue.drill(fleet, node, sku, judge)
