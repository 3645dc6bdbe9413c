"""Kernel and NVIDIA driver packages against the fleet, the running kernel and module, and the image.

The ``config`` probe lists the packages (``dpkg-query -W`` or ``rpm -qa``, with their
install times); each node is compared with the majority of its SKU's nodes, with its
boot time and loaded ``nvidia`` module, and with the image marker
(``/etc/nvtest-image-id``): every package that changed is named.
"""

from __future__ import annotations

import pytest

from nvtest.checks.api import Judge, NodeError, ProbeError, ProbeSkip, measure_probe
from nvtest.checks.config.packages import Package, package_drift, packages_of
from nvtest.checks.config.probe import CONFIG_PROBE, platform
from nvtest.checks.health import apply
from nvtest.session.context import RunContext


@pytest.mark.check("package_drift", area="config", title="Kernel and driver packages vs fleet, boot and image")
def test_package_drift(node, judge: Judge, measure, nvtest_context: RunContext) -> None:
    """A package differing from the fleet's majority, changed since the image or the boot, or not the loaded driver fails."""
    ctx = nvtest_context
    mine = platform(measure(CONFIG_PROBE))
    by_name = ctx.inventory.by_name()
    targets = [by_name[n] for n in (ctx.check_nodes.get("package_drift") or list(by_name))]
    match = ctx.states[node.name].match
    fleet: dict[str, dict[str, Package]] = {}
    for n in targets:
        st = ctx.states[n.name]
        if st.down_reason or (st.match.name if st.match else None) != (match.name if match else None):
            continue
        try:
            pk = packages_of(mine if n.name == node.name else platform(measure_probe(ctx, CONFIG_PROBE, n, targets)))
        except (NodeError, ProbeError, ProbeSkip):
            continue
        if pk is not None:
            fleet[n.name] = pk
    apply(package_drift(mine, fleet), judge)
