"""NCCL collectives across the GPUs of one node (nccl-tests ``all_reduce_perf``).

busbw is judged at the plateau (the largest message size reached), not on
"Avg bus bandwidth"; ``#wrong > 0`` or out-of-bounds values fail whatever the
bandwidth; a run that stops before its requested maximum size is an error.
Skips with the reason on a node without GPUs or without nccl-tests.
"""

from __future__ import annotations

import pytest

from nvtest.check import Judge, Probe, ProbeSkip
from nvtest.errors import ProbeError
from nvtest.facts import NodeFacts
from nvtest.inventory import Node
from nvtest.parsers import nccl_tests
from nvtest.thresholds import SkuProfile

DEFAULT_MAX_BYTES = 8 * 1024**3


def _args(node: Node, sku: SkuProfile | None) -> list[str]:
    recipe = (sku.recipe.get("nccl") if sku else None) or {}
    gpus = sku.expect.gpus if sku and sku.expect.gpus else 1
    return [
        "-b", str(recipe.get("min_bytes", 8)),
        "-e", str(recipe.get("max_bytes", DEFAULT_MAX_BYTES)),
        "-f", "2",
        "-g", str(gpus),
    ]  # fmt: skip


ALL_REDUCE = Probe("nccl_all_reduce", command=("all_reduce_perf",), args=_args, timeout_s=1200)


@pytest.mark.check("nccl", area="interconnect", title="NCCL all_reduce inside the node (busbw)")
def test_nccl(node, node_facts: NodeFacts, raw, judge: Judge) -> None:
    if not node_facts.gpus:
        raise ProbeSkip(node_facts.gpu_absent_reason or "no NVIDIA GPU")
    if not node_facts.tools.get("all_reduce_perf"):
        raise ProbeSkip("nccl-tests not installed: all_reduce_perf not found on the node's PATH")
    res = raw(ALL_REDUCE)
    log = nccl_tests.parse(res.stdout + "\n" + res.stderr)
    if not log.tests:
        raise ProbeError("all_reduce_perf printed no test")
    run = log.tests[0]
    for f in run.failures:
        judge.fail(f"{f.kind} at {f.site}: {f.message}")
    if not run.rows:
        if not run.failures:
            raise ProbeError("all_reduce_perf printed no result row")
        return
    plateau = max(run.rows, key=lambda r: r.size_bytes)
    judge(
        "all_reduce_busbw_gbps",
        plateau.out_of_place.busbw_gbps,
        "GB/s",
        size_bytes=plateau.size_bytes,
    )
    wrong = sum(
        (r.out_of_place.wrong or 0) + ((r.in_place.wrong or 0) if r.in_place else 0)
        for r in run.rows
    )
    judge("wrong", wrong, "count")
    if wrong:
        judge.fail(f"{wrong} wrong results (#wrong > 0)")
    if run.oob_ok is False:
        judge.fail(f"out of bounds values: {run.oob_values}")
    if run.max_bytes and plateau.size_bytes < run.max_bytes:
        raise ProbeError(
            f"run stopped at {plateau.size_bytes} bytes before the requested {run.max_bytes}"
        )
    judge.detail("nccl_warnings", list(run.nccl_warnings))
