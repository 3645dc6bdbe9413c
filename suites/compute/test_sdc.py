"""Silent data corruption: the same computation, bit for bit, on every GPU of the fleet.

Every GPU of every node runs the same deterministic workloads (a chain of GEMMs
per dtype and a few training steps of the smoke model; fixed seed and shapes,
deterministic algorithms on, a fixed thread count on a CPU) and reports a sha256
digest of its outputs. GPUs whose configuration determines the same bits (GPU
model, driver, CUDA and library versions, dtype, CPU thread count) are compared:
a GPU whose digest differs from its group's majority fails, named with its node,
index and serial; a GPU alone in its configuration is a warning (nothing to
compare); groups on different configurations that differ are a configuration
difference (a run warning), not corruption.
"""

from __future__ import annotations

import pytest

from nvtest.analysis.sdc import SdcReport, compare, digests_from_docs
from nvtest.checks.api import (
    Judge,
    Probe,
    ProbeError,
    each_node,
    note_probe_run,
    parse_probe_json,
    raw_output,
)
from nvtest.config.inventory import Node
from nvtest.config.thresholds import SkuProfile
from nvtest.jobs.base import fleet_cache
from nvtest.session.context import RunContext
from nvtest.verdict import Verdict


def _args(node: Node, sku: SkuProfile | None) -> list[str]:
    recipe = (sku.recipe.get("sdc") if sku else None) or {}
    args: list[str] = []
    if recipe.get("dtypes"):
        args += ["--dtypes", ",".join(recipe["dtypes"])]
    for key, opt in (("size", "--size"), ("chain", "--chain"), ("steps", "--steps"),
                     ("seed", "--seed"), ("threads", "--threads")):
        if recipe.get(key) is not None:
            args += [opt, str(recipe[key])]
    return args


SDC = Probe("sdc", script="sdc_probe.py", args=_args, timeout_s=1200, needs=("gpu",), device="any")


def _targets(ctx: RunContext) -> list[Node]:
    by_name = ctx.inventory.by_name()
    return [by_name[n] for n in ctx.check_nodes.get("sdc") or list(by_name)]


def _fleet(ctx: RunContext) -> SdcReport:
    """The comparison of every node of the check whose probe answered ``ok`` (once per run)."""
    targets = fleet_cache(ctx).get("sdc:targets", lambda: _targets(ctx))
    got, _ = each_node(targets, lambda n: parse_probe_json(raw_output(ctx, SDC, n, targets)))
    docs = {name: doc for name, doc in got.items() if doc.get("status") == "ok"}
    return compare(digests_from_docs(docs))


@pytest.mark.check("sdc", area="compute", title="Silent data corruption: the same bits on every GPU of the fleet")
def test_sdc(node, judge: Judge, nvtest_context: RunContext) -> None:
    """This node's GPUs against every GPU of the same configuration in the run."""
    ctx = nvtest_context
    targets = fleet_cache(ctx).get("sdc:targets", lambda: _targets(ctx))
    mine = parse_probe_json(raw_output(ctx, SDC, node, targets))  # this node's own errors raise
    note_probe_run(judge, ctx, SDC, node, mine)
    if mine.get("status") == "skip":
        pytest.skip(str(mine.get("reason") or "sdc probe skipped"))
    if mine.get("status") != "ok":
        raise ProbeError(str(mine.get("reason") or f"sdc probe status {mine.get('status')!r}"))
    report = fleet_cache(ctx).get("sdc:report", lambda: _fleet(ctx))
    errors = []
    for f in report.for_node(node.name):
        d = f.digest
        if f.verdict is Verdict.ERROR:
            errors.append(f.reason)
            continue
        judge("peers_agreeing", f.agreeing, "count", device=d.device, workload=d.workload_label)
        if f.verdict is Verdict.FAIL:
            judge.fail(f.reason)
        elif f.verdict is Verdict.WARN:
            judge.warn(f.reason)
    mine_keys = {f.digest.key for f in report.for_node(node.name)}
    judge.detail("sdc", {
        "groups": [g.to_json() for g in report.groups if (g.workload, g.config) in mine_keys],
        "config_differences": report.config_differences,
        "recipe": mine.get("recipe"),
    })
    if errors and not judge.failures:
        raise ProbeError("; ".join(errors))
