"""The ``config`` probe as the audit checks run it: once per node, shared by every audit check.

:data:`CONFIG_PROBE` runs ``nvtest/probes/config_probe.py`` (one phase, cached under the
evidence name ``config-audit``); :func:`platform` turns this node's document into a
:class:`~nvtest.checks.config.platform.Platform`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from nvtest.checks.config.platform import Platform, platform_from_probe
from nvtest.config.thresholds import SkuProfile
from nvtest.errors import ProbeError, UnreportedHardware
from nvtest.session.expect import expected_gpus, expected_hcas
from nvtest.session.facts import NodeFacts
from nvtest.session.probe import Probe

__all__ = ["CONFIG_PROBE", "platform"]

#: The audit's probe: sysfs, procfs and the tools' reports of one node (read-only). It runs
#: lspci, ip, nvidia-smi and the package manager: a node where lspci or nvidia-smi already
#: hung gets it blocked at once instead of waiting out its timeout.
CONFIG_PROBE = Probe("config-audit", script="config_probe.py", timeout_s=180, needs=("lspci", "nvidia-smi", "ip"))


def platform(doc: Mapping[str, Any], facts: NodeFacts | None = None, sku: SkuProfile | None = None) -> Platform:
    """This node's :class:`Platform` from the probe's document, checked against what the
    node is (fail closed): with ``facts``, every NVIDIA GPU and RDMA NIC the node's readings
    of the PCI bus (sysfs and lspci) or its SKU expect must be among the functions the probe
    found, and a skip for absent hardware names those readings.

    Raises:
        ProbeError: the document is not the ``config`` probe's (an ``error`` verdict).
        UnreportedHardware: the bus or the SKU shows more GPUs or NICs than the probe
            found (``fail``: the audit cannot judge what it did not see).
    """
    try:
        p = platform_from_probe(doc)
    except (KeyError, TypeError, ValueError) as exc:
        raise ProbeError(f"config probe document unreadable: {exc}") from exc
    if facts is None:
        return p
    for exp, seen in ((expected_gpus(facts, sku), len(p.gpus)), (expected_hcas(facts, sku), len(p.nics))):
        if exp.count > seen:
            said = f"; nvidia-smi: {facts.smi_error}" if facts.smi_error and "GPU" in exp.what else ""
            raise UnreportedHardware(
                f"{exp.text()}; the config probe found {seen} in {p.sysfs('sys/bus/pci/devices')}: "
                f"the audit cannot judge the others{said}"
            )
    return dataclasses.replace(p, bus_readings=facts.bus_text())
