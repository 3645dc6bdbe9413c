"""What every gate check is given: the node's tool outputs, its SKU, the site's gate recipe,
the state kept from the last gate, and the readers shared by several checks.

The tool commands are :data:`COMMANDS` (plus one per required mount and service); every one
starts at once when the gate starts (:class:`~nvtest.ops.gate.tools.Sources`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path

from nvtest.checks.health import Outcome
from nvtest.checks.health.kernel_log import KERNEL_LOG_SCRIPT
from nvtest.checks.health.nvlink import FM_SCRIPT
from nvtest.checks.health.pcie import SYSFS_SCRIPT
from nvtest.config.skus import Catalog
from nvtest.config.thresholds import SkuProfile
from nvtest.errors import ParseError
from nvtest.ops.gate.document import GateCheck
from nvtest.ops.gate.recipe import GateRecipe
from nvtest.ops.gate.state import GateState
from nvtest.ops.gate.tools import Sources, ToolOutput
from nvtest.parsers import lspci, nvidia_smi, nvidia_smi_q
from nvtest.parsers.lspci import PciDevice
from nvtest.parsers.nvidia_smi_q import SmiQuery

__all__ = ["GateContext", "base_commands", "df_key", "from_outcome", "read_smi", "recipe_commands"]

#: The passive tools, by source name. The kernel log is read as the ``xid_scan`` check's
#: probe reads it (dmesg, else the journal), but with monotonic timestamps for the cursor.
COMMANDS: dict[str, list[str]] = {
    "smi": ["nvidia-smi", "-q"],
    "nvlink": ["nvidia-smi", "nvlink", "-s"],
    "lspci": ["lspci"],
    "kmod": ["cat", "/proc/driver/nvidia/version"],
    "kernel_log": [
        "sh",
        "-c",
        KERNEL_LOG_SCRIPT.replace(
            "journalctl -k -b --no-pager -q", "journalctl -k -b -o short-monotonic --no-pager -q"
        ),
    ],
    "ibstat": ["ibstat"],
    "fm": ["sh", "-c", FM_SCRIPT],
    "meminfo": ["cat", "/proc/meminfo"],
}

#: ``<dev>/<port>/<counter> <value>`` for every IB port counter the gate watches.
IB_COUNTERS_SCRIPT = r"""
for f in SYSFS/class/infiniband/*/ports/*/counters/link_downed \
         SYSFS/class/infiniband/*/ports/*/counters/link_error_recovery \
         SYSFS/class/infiniband/*/ports/*/counters/symbol_error \
         SYSFS/class/infiniband/*/ports/*/counters/port_rcv_errors; do
  [ -r "$f" ] || continue
  rel=${f#SYSFS/class/infiniband/}
  printf '%s %s\n' "$(echo "$rel" | sed 's|/ports/|/|; s|/counters/|/|')" "$(cat "$f")"
done
echo "### devices"; ls SYSFS/class/infiniband 2>/dev/null
true
"""


#: What a timed-out source is called in the decision that says so.
LABELS = {
    "smi": "nvidia-smi -q",
    "nvlink": "nvidia-smi nvlink -s",
    "kernel_log": "the kernel log (dmesg, else journalctl -k)",
    "fm": "the fabric-manager probe (systemctl, nv-fabricmanager, nvidia-smi --query-gpu)",
    "pcie": "the PCIe link reader (sysfs current/max_link_width and _speed)",
    "ib_counters": "the IB counter reader (sysfs class/infiniband/*/ports/*/counters)",
    "meminfo": "/proc/meminfo",
}


def base_commands(sysfs: Path) -> dict[str, list[str]]:
    """The commands every gate starts at once: :data:`COMMANDS` and the sysfs readers."""
    root = str(sysfs).rstrip("/") or "/"
    out = {k: list(v) for k, v in COMMANDS.items()}
    out["pcie"] = ["sh", "-c", SYSFS_SCRIPT.replace("/sys/", root + "/")]
    out["ib_counters"] = ["sh", "-c", IB_COUNTERS_SCRIPT.replace("SYSFS", root)]
    return out


def df_key(recipe: GateRecipe) -> str:
    """The source name of the recipe's ``df`` (its paths in it: a provisional recipe's differs)."""
    return "df " + " ".join(recipe.disk_free_gib)


def recipe_commands(recipe: GateRecipe) -> dict[str, list[str]]:
    """The commands of the site's recipe: ``df`` of its paths, one ``mountpoint`` and
    ``stat -f`` per required mount, one ``systemctl is-active`` per required service."""
    out: dict[str, list[str]] = {df_key(recipe): ["df", "-P", "-k", *recipe.disk_free_gib]}
    for m in recipe.mounts:
        out[f"mount:{m}"] = ["sh", "-c", 'mountpoint -q "$1" && stat -f -c %T "$1"', "sh", m]
    for s in recipe.services:
        out[f"service:{s}"] = ["systemctl", "is-active", s]
    return out


@dataclass
class GateContext:
    """One gate's inputs. ``sku_source`` prefixes every threshold source from the profile
    (``profile:<sku>``); ``budget_s`` is named by every check that did not answer."""

    sources: Sources
    sku: SkuProfile | None
    sku_source: str
    catalog: Catalog
    recipe: GateRecipe
    recipe_source: str
    state: GateState
    now: float
    budget_s: float
    notes: list[str] = field(default_factory=list)

    def need(self, res: GateCheck, *names: str) -> list[ToolOutput] | None:
        """The outputs of ``names`` (kept as the check's evidence); None when one of them did
        not answer within the budget, or printed more than the capture limit (a part of an
        output is not judged), after recording ``unknown`` for it."""
        outs = []
        for name in names:
            out = self.sources.get(name)
            res.evidence.append(out)
            if out.timed_out:
                label = LABELS.get(name, out.command)
                stopped = bool(out.error and out.error.startswith("interrupted"))
                why = (
                    f"the gate was {out.error} before it answered"
                    if stopped
                    else f"did not answer within the gate's budget ({self.budget_s:g} s): timed out"
                )
                res.add(
                    "unknown",
                    label,
                    f"{label} {why}; not a verdict on the node",
                    cause=None if stopped else "transport:timeout",
                )
                return None
            if out.truncated:  # a count or an event in the dropped middle would be missed
                label = LABELS.get(name, out.command)
                res.add("unknown", label, f"{label}: {out.truncated}; not judged on a part of its output")
                return None
            outs.append(out)
        return outs

    @functools.cached_property
    def smi(self) -> tuple[SmiQuery | None, str]:
        """``nvidia-smi -q`` read: (query, "") or (None, why not). A lost-GPU-only output is
        a query with no GPU and its lost bus ids."""
        out = self.sources.get("smi")
        return read_smi(out)

    @functools.cached_property
    def pci(self) -> tuple[list[PciDevice] | None, str]:
        """``lspci`` read: (devices, "") or (None, why not)."""
        out = self.sources.get("lspci")
        if out.truncated:
            return None, f"lspci: {out.truncated}"
        if not out.ok or not out.stdout.strip():
            return None, f"lspci {'not found' if out.missing else 'failed'}: {out.error or out.tail()}"
        try:
            return list(lspci.parse(out.stdout).devices), ""
        except ParseError as exc:
            return None, f"lspci output unreadable: {exc}"

    @property
    def pci_gpus(self) -> list[PciDevice] | None:
        devs, _ = self.pci
        return None if devs is None else [d for d in devs if d.is_nvidia_gpu]

    @property
    def pci_switches(self) -> list[PciDevice] | None:
        devs, _ = self.pci
        return None if devs is None else [d for d in devs if d.is_nvswitch]

    def gpus_absent(self) -> str | None:
        """Why this node provably has no NVIDIA GPU and needs none (the source named), else None
        (also while a second witness expects GPUs, or says it cannot tell: ``state.expected_by``)."""
        expected = self.sku.expect.gpus if self.sku else None
        gpus = self.pci_gpus
        query, _ = self.smi
        if (
            expected
            or self.state.expected_by is not None
            or gpus is None
            or gpus
            or (query is not None and (query.gpus or query.lost_gpus))
        ):
            return None
        name = self.sku.name if self.sku else "?"
        return f"no NVIDIA GPU: lspci lists no NVIDIA display device and SKU {name} expects none"


def read_smi(out: ToolOutput) -> tuple[SmiQuery | None, str]:
    """Read one ``nvidia-smi -q`` output (see :attr:`GateContext.smi`)."""
    if out.timed_out:
        return None, "did not answer in time"
    if out.missing:
        return None, "nvidia-smi not found"
    if out.truncated:
        return None, f"nvidia-smi -q: {out.truncated}"
    text = out.stdout + "\n" + out.stderr
    try:
        query = nvidia_smi_q.parse(text)
    except ParseError:
        query = None
    if query is not None:
        if query.failure is not None and not query.gpus and not query.lost_gpus:
            # the tool's own words (NVML cannot start, driver mismatch): no reading at all
            return None, f"nvidia-smi -q exited {out.exit_code}: {query.failure.reason}"
        return query, ""
    try:
        plain = nvidia_smi.parse(text)
    except ParseError:
        plain = None
    lost = tuple(getattr(plain, "lost_gpus", ()) or ())
    if lost:
        return SmiQuery(gpus=(), lost_gpus=lost), ""
    return None, f"nvidia-smi -q exited {out.exit_code}: {out.tail(200) or 'no output'}"


def from_outcome(
    res: GateCheck,
    out: Outcome,
    *,
    what: str,
    value: object = None,
    unit: str | None = None,
    threshold: str | None = None,
    source: str | None = None,
    passed: str = "as expected",
) -> None:
    """Turn a health function's :class:`~nvtest.checks.health.Outcome` into decisions of
    ``res``: a skip, each failure, each warning, the error (``unknown``), or one pass; every
    one naming ``what``, ``value``, ``threshold`` and ``source``. Its metrics and notes follow."""
    for m in out.metrics:
        res.metrics.append((m.name, m.value, m.unit, dict(m.labels)))
    res.notes.extend(out.notes)
    findings = (
        [("skip", out.skip)]
        if out.skip is not None
        else [
            *(("fail", f) for f in out.failures),
            *(("warn", w) for w in out.warnings),
            *([("unknown", out.error)] if out.error is not None else []),
        ]
    )
    for verdict, reason in findings or [("pass", passed)]:
        # each finding with its own cause key (Outcome.keys), where the health function set one
        res.add(
            verdict,
            what,
            reason,
            value=value,
            unit=unit,
            threshold=threshold,
            source=source,
            cause=out.keys.get(reason),
        )
