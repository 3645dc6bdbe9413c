"""The restart drills (suites/resilience/test_restart.py): a rank killed during the training
smoke run and the job coming back (:func:`injob`), and nvidia-resiliency-ext's in-process
restart (:func:`inprocess`); the judging is :mod:`nvtest.checks.resilience.drills`'s.

On two nodes or more the in-job drill is one job whose ranks span the nodes
(:mod:`nvtest.checks.resilience.spanning`); on one node, a 2-rank job of its own (the
``restart_injob`` probe). The recovery time feeds the effective-training-time estimate, whose
save time is ``estimate.save_gib`` over the measured write bandwidth of the ``estimate.tier``
checkpoint tier.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nvtest.checks.api import Fleet, Judge, Node, Probe, SkuProfile
from nvtest.checks.resilience.ckpt import tier_entry
from nvtest.checks.resilience.drills import (
    judge_estimate,
    judge_injob,
    judge_injob_span,
    judge_target,
)
from nvtest.checks.resilience.probes import CKPT, INJOB, INPROCESS
from nvtest.checks.resilience.recipe import resilience_recipe
from nvtest.checks.resilience.spanning import run_span_drill, spans_nodes
from nvtest.errors import NvtestError, ProbeSkip
from nvtest.jobs.base import require_launched, require_up

__all__ = ["injob", "inprocess"]

Measure = Callable[[Probe], dict[str, Any]]


def injob(fleet: Fleet, node: Node, measure: Measure, sku: SkuProfile | None, judge: Judge) -> None:
    """Check ``restart_injob`` on ``node``: the in-job drill's figures against
    ``resilience.targets.injob_recovery_s``, then the effective-training-time estimate.

    Raises:
        NodeError: the node was down, or left out of the spanning job.
        ProbeError, ProbeSkip: the drill's probe could not run, or cannot run here (its words).
    """
    rec = resilience_recipe(sku)
    target = float(rec["targets"]["injob_recovery_s"])
    ctx = fleet.ctx
    if spans_nodes(ctx):
        require_up(ctx, node)
        require_launched(ctx, "restart_injob", node, judge.detail)
        drill = run_span_drill(ctx)
        judge.log = ctx.phases.log_path("restart_injob.fault", node.name)
        judge.detail("launcher_fallback_reason", drill.launcher_fallback_reason)
        fig = judge_injob_span(judge, drill, node.name, target)
        restart_source = "measured recovery_s of the whole job (all ranks of all nodes)"
        job_nodes = len(drill.nodes)
    else:
        doc = measure(INJOB)
        judge.detail("launcher_fallback_reason", doc.get("launcher_fallback_reason"))
        fig = judge_injob(judge, doc["results"][0], target)
        restart_source = "measured recovery_s of this node's in-job drill"
        job_nodes = len(ctx.nodes)
    if not fig:
        return
    drill_log = judge.log  # the tier probe below must not take the item's evidence link
    est = rec["estimate"]
    tier = str(est.get("tier", "local"))
    why = "the tier probe reported no write_gbps"
    try:
        entry = tier_entry(measure(CKPT[tier]))
        gbps = entry.get("write_gbps") if entry else None
    except (NvtestError, ProbeSkip, KeyError) as exc:
        gbps, why = None, str(exc)
    if gbps:
        save_s = float(est["save_gib"]) * 2**30 / (gbps * 1e9)
        source = f"{est['save_gib']} GiB per node / {gbps:.3g} GB/s measured write on the {tier} tier"
    else:
        save_s, source = None, f"no {tier} tier bandwidth: {why}"
    judge.log = drill_log
    judge_estimate(judge, est, fig["recovery_s"], save_s, source, restart_source, job_nodes)


def inprocess(measure: Measure, sku: SkuProfile | None, judge: Judge) -> None:
    """Check ``restart_inprocess``: the in-process restart's recovery time against
    ``resilience.targets.inprocess_recovery_s``; training that did not continue fails."""
    rec = resilience_recipe(sku)
    doc = measure(INPROCESS)
    r = doc["results"][0]
    judge("recovery_s", r.get("recovery_s"), "s")
    judge.detail("inprocess", r)
    if not r.get("resumed"):
        judge.fail(f"training did not continue after the in-process restart: {r.get('reason')}")
    judge_target(
        judge,
        "recovery_s",
        r.get("recovery_s"),
        float(rec["targets"]["inprocess_recovery_s"]),
        "inprocess_recovery_s",
    )
