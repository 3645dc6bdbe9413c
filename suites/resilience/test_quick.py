"""Resilience, quick form (delivery suite): checkpoint to node memory and local disk at a small size.

Writes, fsyncs, reads back and verifies ``ckpt.quick_size_mib`` on the memory
and local-disk tiers (GB/s each), and estimates the effective training time
with the local tier's write bandwidth and the in-job recovery *target* as the
restart time (assumed, not measured: the drills are in the resilience suite).
"""

from __future__ import annotations

import pytest

from nvtest.checks.api import Judge, SkuProfile
from nvtest.checks.resilience.ckpt import judge_tier, tier_entry
from nvtest.checks.resilience.drills import judge_estimate
from nvtest.checks.resilience.probes import CKPT_QUICK
from nvtest.checks.resilience.recipe import resilience_recipe


@pytest.mark.check("resilience_quick", area="resilience", title="Checkpoint tiers, quick (memory, local disk)")
def test_resilience_quick(node, nodes, measure, judge: Judge, sku: SkuProfile | None) -> None:
    entries = {}
    for tier, probe in CKPT_QUICK.items():
        doc = measure(probe)
        judge_tier(judge, doc)
        entries[tier] = tier_entry(doc)
        judge.detail(f"tier_{tier}", judge.details.pop("tier", None))
    rec = resilience_recipe(sku)
    est = rec["estimate"]
    local = entries.get("local") or {}
    gbps = local.get("write_gbps")
    save_s = float(est["save_gib"]) * 2**30 / (gbps * 1e9) if gbps else None
    judge_estimate(
        judge,
        est,
        float(rec["targets"]["injob_recovery_s"]),
        save_s,
        f"{est['save_gib']} GiB per node / {gbps} GB/s measured local write",
        "the in-job recovery target (assumed, not measured here)",
        len(nodes),
    )
