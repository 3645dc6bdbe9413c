"""GEMM: dense matrix-multiply throughput per device and dtype, TFLOP/s.

TFLOP/s = 2*m*n*k / seconds / 1e12, median of timed repetitions after a warm-up;
every GPU of the node at once (one process per GPU); on a node whose PCI bus
proves it has no GPU, numpy (and torch when installed) on the CPU in fp64 and
fp32. A node that must have GPUs (bus or SKU) is measured on them or fails with
CUDA's own words: never on the CPU instead. Each result's output is sampled
against a float64 reference; a wrong product fails the item whatever its speed.
A dtype that was asked for and not measured is named; nothing measured is an error.
"""

from __future__ import annotations

import pytest

from nvtest.checks.api import Judge, Node, Probe, ProbeError, SkuProfile


def _gemm_args(node: Node, sku: SkuProfile | None) -> list[str]:
    recipe = (sku.recipe.get("gemm") if sku else None) or {}
    args: list[str] = []
    if recipe.get("dtypes"):
        args += ["--dtypes", ",".join(recipe["dtypes"])]
    if recipe.get("size"):
        args += ["--size", str(recipe["size"])]
    if recipe.get("min_seconds"):
        args += ["--min-seconds", str(recipe["min_seconds"])]
    return args


GEMM = Probe("gemm", script="gemm_probe.py", args=_gemm_args, timeout_s=1800, needs=("gpu",), device="any")


@pytest.mark.check("gemm", area="compute", title="GEMM throughput per device and dtype")
def test_gemm(node, measure, judge: Judge) -> None:
    doc = measure(GEMM)
    measured = 0
    for r in doc["results"]:
        labels = {"device": r.get("device", "?"), "library": r.get("library") or doc.get("library") or "?"}
        if r.get("status") == "skip":
            judge.detail(f"skipped {r.get('dtype')} on {labels['device']}", r.get("reason"))
            continue
        if r.get("status") == "error":
            judge.fail(f"{r.get('dtype')} on {labels['device']}: {r.get('reason')}")
            continue
        measured += 1
        judge(f"{r['dtype']}_tflops", r.get("tflops_median"), "TFLOP/s", **labels)
        check = r.get("check") or {}
        if not check.get("ok", False):
            judge.fail(
                f"{r['dtype']} on {labels['device']}: product wrong, max relative error "
                f"{check.get('max_rel_err')} > tolerance {check.get('tolerance')}"
            )
    if measured == 0 and not judge.failures:
        raise ProbeError(f"the GEMM probe measured no dtype on this node: {judge.details}")
