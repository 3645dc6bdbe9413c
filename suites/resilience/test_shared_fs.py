"""The site's shared filesystem (its checkpoint path), part of delivery where the site declares one.

Recipe ``ckpt.shared_path`` (SKU profile or site overlay): the path must exist on the node (it is
never created: an unmounted path would be a local directory), answer, take a write, and give
its write and read throughput (``ckpt.quick_size_mib``, written, fsynced, read back, CRC-32
verified), all within ``ckpt.shared_deadline_s``: a hung mount fails naming the step it stopped
at, in bounded time. Floors: ``thresholds.shared_fs.write_gbps`` / ``read_gbps`` of the site's
overlay, each with its source. Where the site declares no shared path the check is skipped
saying so (not passed).
"""

from __future__ import annotations

import pytest

from nvtest.checks.api import Judge, ProbeSkip, SkuProfile
from nvtest.checks.resilience.ckpt import judge_reach, judge_tier
from nvtest.checks.resilience.probes import SHARED_FS
from nvtest.checks.resilience.recipe import ckpt_recipe


@pytest.mark.check(
    "shared_fs",
    area="resilience",
    title="Shared filesystem (the site's checkpoint path): reachable, writable, throughput",
)
def test_shared_fs(node, measure, judge: Judge, sku: SkuProfile | None) -> None:
    """The declared shared path answers, takes a write and gives its throughput within the
    recipe's deadline; a missing, read-only or hung path fails with the OS's words."""
    path = ckpt_recipe(sku).get("shared_path")
    if not path:
        raise ProbeSkip("the site declares no shared filesystem (recipe ckpt.shared_path): nothing to check")
    doc = measure(SHARED_FS)
    if judge_reach(judge, doc):
        judge_tier(judge, doc)
