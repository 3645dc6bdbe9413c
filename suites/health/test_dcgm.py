"""DCGM diagnostics (``dcgmi diag -r LEVEL -j``) where DCGM is installed.

The level comes from the SKU recipe (``dcgm_diag: {level: 2}``; 1 without one).
Skips with the reason where dcgmi is missing: that is not a pass. A required
test that DCGM skipped, or a pass carrying an error code, is an error.
"""

from __future__ import annotations

import pytest

from nvtest.checks.api import Judge, Probe
from nvtest.checks.health import apply
from nvtest.checks.health.dcgm import dcgm_diag
from nvtest.config.inventory import Node
from nvtest.config.thresholds import SkuProfile
from nvtest.parsers import dcgmi
from nvtest.session.facts import NodeFacts


def _recipe(sku: SkuProfile | None) -> dict:
    return (sku.recipe.get("dcgm_diag") if sku else None) or {}


def _args(node: Node, sku: SkuProfile | None) -> list[str]:
    return ["-r", str(_recipe(sku).get("level", 1)), "-j"]


DCGM = Probe("dcgmi-diag", command=("dcgmi", "diag"), args=_args, timeout_s=3600, needs=("dcgmi", "gpu"))


@pytest.mark.check("dcgm_diag", area="health", title="DCGM diagnostics (dcgmi diag)")
def test_dcgm_diag(node, judge: Judge, node_facts: NodeFacts, raw, sku: SkuProfile | None) -> None:
    """Worst of DCGM's per-test status and error codes; NVLink is judged by the nvlink check."""
    if not node_facts.gpus:
        pytest.skip(node_facts.gpu_absent_reason or "no NVIDIA GPU")
    if not node_facts.tools.get("dcgmi"):
        pytest.skip("DCGM not installed: dcgmi not found on the node's PATH (not a pass)")
    res = raw(DCGM)
    required = tuple(_recipe(sku).get("required", ()))
    apply(dcgm_diag(dcgmi.parse(res.stdout), sku, required), judge)
