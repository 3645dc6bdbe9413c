"""``persistence_mode``: the persistence mode of every GPU the PCI bus shows.

Without persistence the driver tears a GPU's state down when its last client exits and
rebuilds it at the next start (seconds per job, settings and ECC counters reloaded).
Whether to run with it is the operator's choice (``nvidia-persistenced`` or
``nvidia-smi -pm 1``); nvtest never sets it.

Source: ``nvidia-smi --query-gpu=pci.bus_id,persistence_mode --format=csv,noheader``
(read by :mod:`nvtest.parsers.nvidia_smi_csv`), against the GPUs in
``/sys/bus/pci/devices``.

Verdicts:

- a GPU on the bus that nvidia-smi reports no persistence mode for (nvidia-smi missing,
  failing, or silent about that GPU): **fail** with nvidia-smi's words;
- GPUs that differ from each other: **fail** (the same hardware the same way);
- all ``Disabled``: **warn**, or **fail** where the SKU recipe says
  ``config: {persistence_mode: required}``; ``any`` records the mode only.

No GPU on the bus: skip, naming sysfs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nvtest.checks.config import ConfigFinding, Severity, absent, record
from nvtest.checks.config.platform import Platform, bus_source
from nvtest.checks.health import Outcome
from nvtest.errors import ParseError
from nvtest.parsers import nvidia_smi_csv
from nvtest.playbook.config_audit import REMEDIATION

__all__ = ["FIELDS", "persistence_mode"]

#: The ``--query-gpu`` fields the probe asks for, in order.
FIELDS = ("pci.bus_id", "persistence_mode")


def _bdf(bus_id: str) -> str:
    """``00000000:04:00.0`` -> ``0000:04:00.0``."""
    s = bus_id.strip().lower()
    return s[-12:] if len(s) >= 12 else s


def persistence_mode(p: Platform, recipe: Mapping[str, Any] | None = None) -> Outcome:
    """Judge persistence mode (see the module doc); ``recipe``: the SKU's ``config`` section."""
    out = Outcome()
    if not p.gpus:
        return absent(out, "no NVIDIA GPU", bus_source(p))
    want = str((recipe or {}).get("persistence_mode", "expected"))
    smi = p.tool("nvidia-smi")
    source = smi.command if smi and smi.cmd else "nvidia-smi --query-gpu=pci.bus_id,persistence_mode"
    modes: dict[str, str] = {}
    words = smi.words() if smi else "the probe did not run nvidia-smi"
    if smi is not None and smi.reported:
        try:
            csv = nvidia_smi_csv.parse(smi.stdout, fields=FIELDS)
            modes = {_bdf(str(r.values[0])): str(r.values[1]) for r in csv.rows}
            if csv.lost_gpus:
                words = "; ".join(csv.lost_gpus)
        except ParseError:
            words = " | ".join(ln.strip() for ln in smi.stdout.strip().splitlines()[:2])
    for g in p.gpus:
        if g.bdf not in modes:
            record(
                out,
                ConfigFinding(
                    "fail",
                    f"{g.label} is on the PCI bus and nvidia-smi reports no persistence mode for it: {words}",
                    source,
                    REMEDIATION["persistence_unreadable"],
                ),
            )
    seen = {modes[g.bdf] for g in p.gpus if g.bdf in modes}
    out.details["persistence_mode"] = {g.bdf: modes.get(g.bdf) for g in p.gpus}
    if len(seen) > 1:
        by = ", ".join(f"{g.bdf}={modes[g.bdf]}" for g in p.gpus if g.bdf in modes)
        record(
            out,
            ConfigFinding(
                "fail", f"persistence mode differs between GPUs: {by}", source, REMEDIATION["persistence_mixed"]
            ),
        )
    elif seen == {"Disabled"} and want != "any":
        sev: Severity = "fail" if want == "required" else "warn"
        record(
            out,
            ConfigFinding(
                sev, f"persistence mode Disabled on {len(modes)} GPU(s)", source, REMEDIATION["persistence_off"]
            ),
        )
    elif seen:
        record(out, ConfigFinding("note", f"persistence mode {next(iter(seen))} on {len(modes)} GPU(s)", source))
    return out
