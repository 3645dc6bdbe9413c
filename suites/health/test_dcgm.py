"""DCGM diagnostics (``dcgmi diag -r LEVEL -j``) where DCGM is installed.

The level comes from the SKU recipe (``dcgm_diag: {level: 2}``; 1 without one).
On a node with GPUs, dcgmi missing from the node's PATH is an ``error`` (nothing was
diagnosed); only a PCI bus that shows no GPU skips the check. A required test that
DCGM skipped, or a pass carrying an error code, is an error.
"""

from __future__ import annotations

import pytest

from nvtest.checks.api import Judge, Probe
from nvtest.checks.hardware import expected_gpus, read_tool, require, require_tool
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
    exp = require(expected_gpus(node_facts, sku))
    require_tool(node_facts, exp, "dcgmi", "DCGM, datacenter-gpu-manager")
    diag = read_tool(exp, "dcgmi diag", raw(DCGM), dcgmi.parse, stdout_only=True)
    required = tuple(_recipe(sku).get("required", ()))
    apply(dcgm_diag(diag, sku, required), judge)
