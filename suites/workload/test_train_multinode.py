"""Training smoke run across all nodes: torchrun on every node, DDP on a tiny transformer.

Rendezvous on the first node (a free port there); NCCL on GPUs, gloo on CPU. Passes when the
loss falls (last 5 steps below 90 % of the first 5), no loss is NaN, and every node's ranks
finish within the timeout. Metrics: step time (median, s) and tokens/s of the whole job; the
rank -> node map is in the item's details. One item per node: a node whose ranks failed or
hung is named in its own item; a node an earlier check failed, or on which something hung, is
left out of the launch and named (its item an error saying which check).

The check is :func:`nvtest.checks.workload.training.multinode`.
"""

from __future__ import annotations

import pytest

from nvtest.checks.api import Fleet, Judge, Node
from nvtest.checks.workload import training


@pytest.mark.check("train_multinode", area="workload", title="Multi-node training smoke run (torchrun, DDP)")
def test_train_multinode(node: Node, fleet: Fleet, judge: Judge) -> None:
    training.multinode(fleet, node, judge)
