"""``clocks``: clock-throttle reasons at idle, one judgement for ``nvtest run`` and the gate.

Input: the GPUs of ``nvidia-smi -q`` / ``-q -x`` (:class:`~nvtest.parsers.nvidia_smi_q.SmiQuery`),
whose ``Clocks Event Reasons`` (``Clocks Throttle Reasons`` before driver 535) say what holds
the clocks down. On an idle GPU a hardware slowdown (``HW Slowdown``, ``HW Thermal
Slowdown``, ``HW Power Brake Slowdown``: the board or the chassis pulling the clocks down for
heat or power delivery, e.g. a failed power supply) **fails**; a software thermal slowdown
**warns**; the others (idle, applications clocks, SW power cap, sync boost) say nothing.
Severities are those of the burn-in probe (``nvtest/probes/_burnin_logic.SEVERITY``).
"""

from __future__ import annotations

import re

from nvtest.checks.health import Outcome
from nvtest.parsers.nvidia_smi_q import SmiQuery

__all__ = ["THROTTLE_SEVERITY", "idle_throttle"]

#: Throttle reasons at idle and what they mean (as the burn-in probe's _burnin_logic.SEVERITY).
THROTTLE_SEVERITY = {
    "hw_slowdown": "fail",
    "hw_thermal_slowdown": "fail",
    "hw_power_brake_slowdown": "fail",
    "sw_thermal_slowdown": "warn",
}


def idle_throttle(query: SmiQuery) -> Outcome:
    """Judge each GPU's active clock-event reasons (see the module doc).

    ``details["clock_event_reasons"]``: the reasons of a severity seen on any GPU, sorted.
    """
    out = Outcome()
    seen: set[str] = set()
    for i, g in enumerate(query.gpus):
        for r in (re.sub(r"^clocks?_(event|throttle)_reasons?_", "", x) for x in g.clock_event_reasons_active):
            sev = THROTTLE_SEVERITY.get(r)
            if sev == "fail":
                out.fail(
                    f"GPU {i} ({g.pci_bus_id}): {r} active at idle: hardware throttling (cooling or power delivery)",
                    "clocks:idle_slowdown",
                )
            elif sev == "warn":
                out.warn(f"GPU {i} ({g.pci_bus_id}): {r} active at idle")
            if sev:
                seen.add(r)
    out.details["clock_event_reasons"] = sorted(seen)
    return out
