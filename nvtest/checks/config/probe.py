"""The ``config`` probe as the audit checks run it: once per node, shared by every audit check.

:data:`CONFIG_PROBE` runs ``nvtest/probes/config_probe.py`` (one phase, cached under the
evidence name ``config-audit``); :func:`platform` turns this node's document into a
:class:`~nvtest.checks.config.platform.Platform`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nvtest.checks.config.platform import Platform, platform_from_probe
from nvtest.errors import ProbeError
from nvtest.session.probe import Probe

__all__ = ["CONFIG_PROBE", "platform"]

#: The audit's probe: sysfs, procfs and the tools' reports of one node (read-only).
CONFIG_PROBE = Probe("config-audit", script="config_probe.py", timeout_s=180)


def platform(doc: Mapping[str, Any]) -> Platform:
    """This node's :class:`Platform` from the probe's document.

    Raises:
        ProbeError: the document is not the ``config`` probe's (an ``error`` verdict).
    """
    try:
        return platform_from_probe(doc)
    except (KeyError, TypeError, ValueError) as exc:
        raise ProbeError(f"config probe document unreadable: {exc}") from exc
