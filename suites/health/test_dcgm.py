"""DCGM diagnostics (``dcgmi diag -r LEVEL -j``) where DCGM is installed.

The level comes from the SKU recipe (``dcgm_diag: {level: 2}``; 1 without one), and so may
its deadline (``timeout_s``; 3600 s without one).
On a node with GPUs, dcgmi missing from the node's PATH is an ``error`` (nothing was
diagnosed); only a PCI bus that shows no GPU skips the check. A required test that
DCGM skipped, or a pass carrying an error code, is an error.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from nvtest.checks.api import Judge, Node, Probe, SkuProfile
from nvtest.checks.health import apply
from nvtest.checks.health.dcgm import dcgm_diag
from nvtest.parsers import dcgmi


def _recipe(sku: SkuProfile | None) -> dict[str, Any]:
    return (sku.recipe.get("dcgm_diag") if sku else None) or {}


def _args(node: Node, sku: SkuProfile | None) -> list[str]:
    return ["-r", str(_recipe(sku).get("level", 1)), "-j"]


DCGM = Probe(
    "dcgmi-diag",
    command=("dcgmi", "diag"),
    args=_args,
    timeout_s=3600,
    needs=("dcgmi", "gpu"),
    expects="gpu",
    parse=dcgmi.parse,
    package="DCGM, datacenter-gpu-manager",
    stdout_only=True,
)


@pytest.mark.check("dcgm_diag", area="health", title="DCGM diagnostics (dcgmi diag)")
def test_dcgm_diag(node, judge: Judge, read, sku: SkuProfile | None) -> None:
    """Worst of DCGM's per-test status and error codes; NVLink is judged by the nvlink check."""
    deadline = _recipe(sku).get("timeout_s")
    diag = read(replace(DCGM, timeout_s=float(deadline)) if deadline else DCGM)
    required = tuple(_recipe(sku).get("required", ()))
    apply(dcgm_diag(diag, sku, required), judge)
