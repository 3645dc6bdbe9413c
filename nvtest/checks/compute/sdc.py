"""The silent-data-corruption check (suites/compute/test_sdc.py): every GPU of every node runs
the same deterministic workloads (``sdc_probe.py``) and reports digests; GPUs of one
configuration are compared (:func:`nvtest.analysis.sdc.compare`), once per run.

A GPU whose digest differs from its group's majority fails, named with its node, index and
serial; a GPU alone in its configuration is a warning; groups on different configurations
that differ are a configuration difference, not corruption.
"""

from __future__ import annotations

from nvtest.analysis.sdc import SdcReport, compare, digests_from_docs
from nvtest.checks.api import (
    Fleet,
    Judge,
    Node,
    Probe,
    ProbeError,
    ProbeSkip,
    SkuProfile,
    each_node,
    note_probe_run,
    parse_probe_json,
    raw_output,
)
from nvtest.verdict import Verdict

__all__ = ["SDC", "compare_fleet"]


def _args(node: Node, sku: SkuProfile | None) -> list[str]:
    recipe = (sku.recipe.get("sdc") if sku else None) or {}
    args: list[str] = []
    if recipe.get("dtypes"):
        args += ["--dtypes", ",".join(recipe["dtypes"])]
    for key, opt in (
        ("size", "--size"),
        ("chain", "--chain"),
        ("steps", "--steps"),
        ("seed", "--seed"),
        ("threads", "--threads"),
    ):
        if recipe.get(key) is not None:
            args += [opt, str(recipe[key])]
    return args


SDC = Probe("sdc", script="sdc_probe.py", args=_args, timeout_s=1200, needs=("gpu",), device="any")


def _targets(fleet: Fleet) -> list[Node]:
    """The check's nodes (its items' nodes; every node of the inventory without a plan), once."""

    def compute() -> list[Node]:
        by_name = fleet.ctx.inventory.by_name()
        return [by_name[n] for n in fleet.ctx.check_nodes.get("sdc") or list(by_name)]

    return fleet.once("sdc:targets", compute)


def _fleet(fleet: Fleet) -> SdcReport:
    """The comparison of every node of the check whose probe answered ``ok`` (once per run)."""
    targets = _targets(fleet)
    got, _ = each_node(targets, lambda n: parse_probe_json(raw_output(fleet.ctx, SDC, n, targets)))
    docs = {name: doc for name, doc in got.items() if doc.get("status") == "ok"}
    return compare(digests_from_docs(docs))


def compare_fleet(fleet: Fleet, node: Node, judge: Judge) -> None:
    """Check ``sdc`` on ``node``: its GPUs against every GPU of the same configuration in the
    run (``peers_agreeing`` per device and workload, count).

    Raises:
        ProbeSkip: the probe skipped on this node (its reason).
        ProbeError: the node's probe failed, or its digests could not be compared (why).
    """
    ctx = fleet.ctx
    targets = _targets(fleet)
    mine = parse_probe_json(raw_output(ctx, SDC, node, targets))  # this node's own errors raise
    note_probe_run(judge, ctx, SDC, node, mine)
    if mine.get("status") == "skip":
        raise ProbeSkip(str(mine.get("reason") or "sdc probe skipped"))
    if mine.get("status") != "ok":
        raise ProbeError(str(mine.get("reason") or f"sdc probe status {mine.get('status')!r}"))
    report = fleet.once("sdc:report", lambda: _fleet(fleet))
    errors = []
    for f in report.for_node(node.name):
        d = f.digest
        if f.verdict is Verdict.ERROR:
            errors.append(f.reason)
            continue
        judge("peers_agreeing", f.agreeing, "count", device=d.device, workload=d.workload_label)
        if f.verdict is Verdict.FAIL:
            judge.fail(f.reason, "results:wrong")  # outputs that differ from the fleet's
        elif f.verdict is Verdict.WARN:
            judge.warn(f.reason)
    mine_keys = {f.digest.key for f in report.for_node(node.name)}
    judge.detail(
        "sdc",
        {
            "groups": [g.to_json() for g in report.groups if (g.workload, g.config) in mine_keys],
            "config_differences": report.config_differences,
            "recipe": mine.get("recipe"),
        },
    )
    if errors and not judge.failures:
        raise ProbeError("; ".join(errors))
