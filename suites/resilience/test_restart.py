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
"""

from __future__ import annotations

import pytest

from nvtest.checks.api import Judge
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
from nvtest.config.thresholds import SkuProfile
from nvtest.errors import NvtestError, ProbeSkip
from nvtest.jobs.base import require_launched, require_up


@pytest.mark.check("restart_injob", area="resilience", title="In-job restart after a killed rank")
def test_restart_injob(node, measure, judge: Judge, sku: SkuProfile | None, nvtest_context) -> None:
    rec = resilience_recipe(sku)
    target = float(rec["targets"]["injob_recovery_s"])
    ctx = nvtest_context
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
        source = (
            f"{est['save_gib']} GiB per node / {gbps:.3g} GB/s measured write on the {tier} tier"
        )
    else:
        save_s, source = None, f"no {tier} tier bandwidth: {why}"
    judge.log = drill_log
    judge_estimate(judge, est, fig["recovery_s"], save_s, source, restart_source, job_nodes)


@pytest.mark.check(
    "restart_inprocess", area="resilience", title="In-process restart (nvidia-resiliency-ext)"
)
def test_restart_inprocess(node, measure, judge: Judge, sku: SkuProfile | None) -> None:
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
