"""Kernel and NVIDIA driver packages against the fleet, the running kernel and module, and the image.

The ``config`` probe lists the packages (``dpkg-query -W`` or ``rpm -qa``, with their
install times); each node is compared with the majority of its SKU's nodes, with its
boot time and loaded ``nvidia`` module, and with the image marker
(``/etc/nvtest-image-id``): every package that changed is named.
"""

from __future__ import annotations

import pytest

from nvtest.checks.api import Judge, each_node, measure_probe
from nvtest.checks.config.packages import Package, package_drift, packages_of
from nvtest.checks.config.probe import CONFIG_PROBE, platform
from nvtest.checks.health import apply
from nvtest.jobs.base import fleet_cache
from nvtest.session.context import RunContext


@pytest.mark.check("package_drift", area="config", title="Kernel and driver packages vs fleet, boot and image")
def test_package_drift(node, judge: Judge, measure, nvtest_context: RunContext) -> None:
    """A package differing from the fleet's majority, changed since the image or the boot, or not the loaded driver fails."""
    ctx = nvtest_context
    mine = platform(measure(CONFIG_PROBE))
    match = ctx.states[node.name].match
    sku_name = match.name if match else None
    fleet = fleet_cache(ctx).get(f"package_drift:fleet:{sku_name}", lambda: _fleet_packages(ctx, sku_name))
    apply(package_drift(mine, fleet), judge)


def _fleet_packages(ctx: RunContext, sku_name: str | None) -> dict[str, dict[str, Package]]:
    """node -> its packages, for every reachable node of ``sku_name`` whose probe answered
    (once per run and SKU: an item compares, it does not walk the fleet)."""
    by_name = ctx.inventory.by_name()
    targets = [by_name[n] for n in (ctx.check_nodes.get("package_drift") or list(by_name))]
    same = [
        n for n in targets
        if not ctx.states[n.name].down_reason
        and (ctx.states[n.name].match.name if ctx.states[n.name].match else None) == sku_name
    ]  # fmt: skip
    got, _ = each_node(same, lambda n: packages_of(platform(measure_probe(ctx, CONFIG_PROBE, n, targets))))
    return {name: pk for name, pk in got.items() if pk is not None}
