"""Straggler scores: per-rank section timings of the training run, scored relative to the fastest rank.

Each section's relative score is the fastest rank's median time over this
rank's (1.0: as fast as the best; 0.5: twice as slow); a rank's score is its
lowest over the sections without a collective.  Scores come from
nvidia-resiliency-ext's straggler ``ReportGenerator`` fed with CPU section
timings (its CUPTI-based ``Detector`` needs CUDA), or the same formula
computed by the probe.  A rank below ``resilience.straggler_min_score`` fails
the item and is named; across nodes, each node's median step time is set
against the fastest node's (``node_relative_score``).
"""

from __future__ import annotations

import pytest

from nvtest.checks.api import Judge, SkuProfile
from nvtest.checks.resilience.drills import judge_stragglers, node_scores
from nvtest.checks.resilience.probes import STRAGGLER
from nvtest.checks.resilience.recipe import resilience_recipe


@pytest.mark.check("straggler", area="resilience", title="Straggler scores per rank and node")
def test_stragglers(node, nodes, nvtest_context, measure, judge: Judge, sku: SkuProfile | None) -> None:
    rec = resilience_recipe(sku)
    doc = measure(STRAGGLER)
    judge_stragglers(judge, doc["results"][0], float(rec["straggler_min_score"]))
    fleet = node_scores(nvtest_context, STRAGGLER, nodes)
    judge("node_relative_score", fleet["scores"].get(node.name), "ratio", scope="fleet")
    judge.detail("fleet", fleet)
