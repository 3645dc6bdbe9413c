"""Checkpoint tiers: write, fsync, read back and verify a checkpoint-sized file per node.

Three tiers, each its own phase over all nodes at once: node memory
(``/dev/shm``), node-local disk (recipe ``ckpt.local_path``) and the shared
filesystem (``ckpt.shared_path``; skipped with the reason when none is
configured).  On the shared tier every node writes at the same time, so the
per-node figure is its share under load and the aggregate (all bytes over the
span from the first start to the last end) is the filesystem's.  Each tier also
times saving and restoring the training smoke run's model state.

A read-back whose CRC-32 differs from the one written fails the item.
"""

from __future__ import annotations

import pytest

from nvtest.checks.api import Judge
from nvtest.checks.resilience.ckpt import aggregate, judge_reach, judge_tier
from nvtest.checks.resilience.probes import CKPT


@pytest.mark.check("ckpt_mem", area="resilience", title="Checkpoint to node memory (/dev/shm)")
def test_ckpt_mem(node, measure, judge: Judge) -> None:
    judge_tier(judge, measure(CKPT["mem"]))


@pytest.mark.check("ckpt_local", area="resilience", title="Checkpoint to node-local disk")
def test_ckpt_local(node, measure, judge: Judge) -> None:
    judge_tier(judge, measure(CKPT["local"]))


@pytest.mark.check(
    "ckpt_shared",
    area="resilience",
    title="Checkpoint to the shared filesystem (all nodes at once)",
)
def test_ckpt_shared(node, nodes, nvtest_context, measure, judge: Judge) -> None:
    doc = measure(CKPT["shared"])
    if judge_reach(judge, doc):
        judge_tier(judge, doc)
    agg = aggregate(nvtest_context, CKPT["shared"], nodes)
    judge("aggregate_write_gbps", agg["write_gbps"], "GB/s", scope="fleet")
    judge("aggregate_read_gbps", agg["read_gbps"], "GB/s", scope="fleet")
    judge.detail("aggregate", agg)
