"""Kernel and NVIDIA driver packages against the fleet, the running kernel and module, and the image.

The ``config`` probe lists the packages (``dpkg-query -W`` or ``rpm -qa``, with their
install times); each node is compared with the majority of its SKU's nodes, with its
boot time and loaded ``nvidia`` module, and with the image marker
(``/etc/nvtest-image-id``): every package that changed is named.
"""

from __future__ import annotations

import pytest

from nvtest.checks.api import Judge, RunContext
from nvtest.checks.config.packages import fleet_packages, package_drift
from nvtest.checks.config.probe import CONFIG_PROBE, platform
from nvtest.checks.health import apply


@pytest.mark.check("package_drift", area="config", title="Kernel and driver packages vs fleet, boot and image")
def test_package_drift(node, judge: Judge, measure, nvtest_context: RunContext) -> None:
    """A package differing from the fleet's majority, changed since the image or the boot, or not the loaded driver fails."""
    mine = platform(measure(CONFIG_PROBE))
    apply(package_drift(mine, fleet_packages(nvtest_context, node)), judge)
