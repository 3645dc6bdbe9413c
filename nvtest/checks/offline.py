"""Checks judged again from a run's recorded node facts alone, for ``nvtest evaluate``.

The checks of the inventory (``host``, ``gpus``, ``driver_stack``) measure nothing new
on the node: their verdict is the node facts (results.json ``nodes.<node>.inventory``)
against a SKU profile. :func:`rejudge_from_facts` runs the same pure functions the
suites run on those recorded facts with another profile, so that re-judging a run
with ``--sku`` applies the profile's expectations (GPU count and model, driver, ECC)
and not only its thresholds. The analysis layer receives it as a callback
(:func:`nvtest.analysis.reevaluate.evaluate_run`), which keeps the layers in order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from nvtest.checks.api import Judge
from nvtest.checks.health import Outcome, apply
from nvtest.checks.health.gpus import driver_stack, gpu_inventory
from nvtest.checks.health.host import host_inventory
from nvtest.config.skus import Catalog
from nvtest.config.thresholds import SkuProfile
from nvtest.errors import ProbeError, ProbeSkip
from nvtest.session.facts import NodeFacts, facts_from_json, hardware_of

__all__ = ["FACT_CHECKS", "rejudge_from_facts"]

#: check -> its judgement from the node facts, the profile and the catalog.
FACT_CHECKS: dict[str, Callable[[NodeFacts, SkuProfile | None, Catalog], Outcome]] = {
    "host": lambda facts, prof, cat: host_inventory(facts),
    "gpus": lambda facts, prof, cat: gpu_inventory(facts, prof, cat),
    "driver_stack": lambda facts, prof, cat: driver_stack(
        facts.driver_version, facts.cuda_version, prof, has_gpus=bool(facts.gpus)
    ),
}


def rejudge_from_facts(
    result: Mapping[str, Any],
    facts: Mapping[str, Any] | None,
    profile: SkuProfile | None,
    catalog: Catalog,
    nodes: int = 1,
) -> dict[str, Any] | None:
    """``result`` (a results.json item) judged again from the recorded ``facts`` with ``profile``.

    Returns ``{"verdict", "reason", "metrics", "details"}`` (metrics as results.json
    dicts, thresholds' origins from ``catalog``), or None when the check is not one of
    :data:`FACT_CHECKS` or the run recorded no facts for the node.
    """
    fn = FACT_CHECKS.get(str(result.get("check")))
    if fn is None or not facts:
        return None
    node_facts = facts_from_json(dict(facts))
    judge = Judge(None, result["check"], result["node"], profile, hardware=hardware_of(node_facts, profile, nodes))
    verdict: str | None = None
    reason = ""
    try:
        apply(fn(node_facts, profile, catalog), judge)
    except ProbeSkip as exc:
        verdict, reason = "skip", str(exc)
    except ProbeError as exc:
        verdict, reason = "error", str(exc)
    metrics = [m.to_json() for m in judge.metrics]
    for m in metrics:
        if m.get("threshold") and profile is not None:
            m["threshold"]["origin"] = catalog.origin(profile.name, result["check"], m["name"])
    return {
        "verdict": verdict or judge.verdict.value,
        "reason": reason or judge.summary(),
        "metrics": [] if verdict == "skip" else metrics,
        "details": {**(result.get("details") or {}), **judge.details},
    }
