"""Restart drills: a rank killed during the training smoke run, and the job coming back.

In-job: the run goes under the fault-tolerance launcher (``ft_launcher`` from
nvidia-resiliency-ext, else ``torchrun --max-restarts``) with periodic
checkpoints; at a random step one rank gets SIGKILL.  Measured: time until the
fault is detected, until the ranks are up again, until the checkpoint is
reloaded, until every rank has trained a step (recovery), and the steps lost;
the losses after the resume must equal those of an uninterrupted run with the
same seed.  The recovery time is set beside its target (recipe
``resilience.targets``) and feeds the effective-training-time estimate
(docs/resilience.md), whose save time is ``estimate.save_gib`` over the
measured write bandwidth of the ``estimate.tier`` checkpoint tier.

On two nodes or more the drill is ONE job whose ranks span the nodes (``nproc`` per node,
one launcher per node, c10d rendezvous on the first node), one rank on one node killed; the
nodes' launchers restart their ranks, which rejoin and resume together
(:mod:`nvtest.checks.resilience.spanning`).  Each node's item has its own ranks' figures, the job's
in the details; the effective-time estimate takes the job's recovery time.  One node runs
the drill as a 2-rank job of its own.

In-process: nvidia-resiliency-ext's in-process restart wrapper, where it
supports the backend in use; otherwise skipped with the exact reason.

The checks are :mod:`nvtest.checks.resilience.restart`'s.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from nvtest.checks.api import Fleet, Judge, Node, Probe, SkuProfile
from nvtest.checks.resilience import restart


@pytest.mark.check("restart_injob", area="resilience", title="In-job restart after a killed rank")
def test_restart_injob(
    node: Node, measure: Callable[[Probe], dict[str, Any]], judge: Judge, sku: SkuProfile | None, fleet: Fleet
) -> None:
    restart.injob(fleet, node, measure, sku, judge)


@pytest.mark.check("restart_inprocess", area="resilience", title="In-process restart (nvidia-resiliency-ext)")
def test_restart_inprocess(
    node: Node, measure: Callable[[Probe], dict[str, Any]], judge: Judge, sku: SkuProfile | None
) -> None:
    restart.inprocess(measure, sku, judge)
