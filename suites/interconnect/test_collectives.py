"""Collectives with torch.distributed: the fallback when nccl-tests is absent, and across nodes.

- ``collectives``: inside each node, ``--nproc`` local ranks (one per GPU, NCCL; or gloo on
  CPU) run all_reduce, all_gather, reduce_scatter and alltoall over the recipe's sizes. Runs
  where nccl-tests is not installed (where it is, the ``nccl`` check measures the node).
- ``collectives_multinode``: the same probe under torchrun on every node at once.

busbw uses nccl-tests' factors (see ``nvtest/probes/collective_probe.py``) and is judged at
the largest size as ``<op>_busbw_gbps``; any wrong element fails the item whatever the
bandwidth.

The orchestration is :mod:`nvtest.checks.interconnect.collectives`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from nvtest.checks.api import Fleet, Judge, Node, NodeFacts, Probe
from nvtest.checks.interconnect import collectives


@pytest.mark.check("collectives", area="interconnect", title="Collectives inside the node (torch.distributed)")
def test_collectives(
    node: Node, node_facts: NodeFacts, measure: Callable[[Probe], dict[str, Any]], judge: Judge
) -> None:
    collectives.inside(node_facts, measure, judge)


@pytest.mark.check("collectives_multinode", area="interconnect", title="Collectives across all nodes (torchrun)")
def test_collectives_multinode(node: Node, fleet: Fleet, judge: Judge) -> None:
    collectives.across(fleet, node, judge)
