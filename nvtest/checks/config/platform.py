"""The ``config`` probe's document as typed records (``nvtest/probes/config_probe.py``).

The probe reads sysfs and procfs under its ``--sysfs-root`` and sends the raw text of
``lspci -D -vvv``, ``ip -d -j addr show``, ``nvidia-smi --query-gpu`` and the package
query; this module turns the document into :class:`Platform` and leaves the tools' text
to the audit modules that judge it. CPU lists are the kernel's ``cpulist`` format
(``0-15,32-47``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "PROBE_NAME",
    "PciFunction",
    "Platform",
    "ToolRun",
    "bus_source",
    "format_cpulist",
    "parse_cpulist",
    "platform_from_probe",
]

#: The probe's ``"probe"`` value.
PROBE_NAME = "config"


def parse_cpulist(text: str | None) -> frozenset[int] | None:
    """``"0-3,8,10-11"`` -> {0, 1, 2, 3, 8, 10, 11}; None for None or text that is no cpulist."""
    if text is None:
        return None
    cpus: set[int] = set()
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        lo, _, hi = part.partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            return None
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return frozenset(cpus)


def format_cpulist(cpus: frozenset[int] | set[int]) -> str:
    """{0, 1, 2, 3, 8} -> ``"0-3,8"``."""
    out: list[str] = []
    run: list[int] = []
    for c in sorted(cpus):
        if run and c == run[-1] + 1:
            run.append(c)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [c]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)


@dataclass(frozen=True)
class PciFunction:
    """One audited PCI function (a GPU or an RDMA NIC) as sysfs shows it.

    Attributes:
        bdf: ``0000:04:00.0``.
        kind: ``gpu`` or ``nic``.
        numa_node: the ``numa_node`` file (-1: firmware reported none); None unreadable.
        local_cpus: the ``local_cpulist`` file as CPU ids; None unreadable.
        iommu_group / iommu_group_type: the group's name and ``type`` (``identity``,
            ``DMA``, ``DMA-FQ``; kernel >= 5.11); None when absent.
        path: the bridges between it and the root complex, root port first.
    """

    bdf: str
    kind: str
    vendor: str
    device: str | None
    cls: str
    numa_node: int | None
    local_cpus: frozenset[int] | None
    iommu_group: str | None
    iommu_group_type: str | None
    driver: str | None
    path: tuple[str, ...]

    @property
    def label(self) -> str:
        return f"{self.kind.upper()} {self.bdf}"


@dataclass(frozen=True)
class ToolRun:
    """A tool the probe ran: its argv, exit code (None: did not run), output and why not."""

    cmd: tuple[str, ...]
    rc: int | None
    stdout: str
    stderr: str
    reason: str | None

    @property
    def command(self) -> str:
        return " ".join(self.cmd)

    def words(self) -> str:
        """What the tool said when it did not report: its reason, stderr or exit code."""
        if self.reason:
            return self.reason
        err = " | ".join(ln.strip() for ln in self.stderr.strip().splitlines()[-3:] if ln.strip())
        if err:
            return err
        if self.rc not in (None, 0) and self.stdout.strip():
            # nvidia-smi prints its failure on stdout ("NVIDIA-SMI has failed because it
            # couldn't communicate with the NVIDIA driver..."), exit 9
            out = " | ".join(ln.strip() for ln in self.stdout.strip().splitlines()[-3:] if ln.strip())
            return f"exit {self.rc}: {out}"
        return f"exit {self.rc}" + ("" if self.stdout.strip() else ", no output")

    @property
    def reported(self) -> bool:
        """True when it ran, exited 0 and printed something (a tool that failed has not
        reported, whatever it printed: its words are :meth:`words`)."""
        return self.rc == 0 and bool(self.stdout.strip())


@dataclass(frozen=True)
class Platform:
    """One node's configuration as the ``config`` probe saw it (see the module doc)."""

    host: str
    root: str
    devices: tuple[PciFunction, ...]
    bridges: Mapping[str, Mapping[str, Any]]
    numa_nodes: Mapping[int, frozenset[int] | None]
    cpus_allowed: frozenset[int] | None
    cmdline: str | None
    iommu_groups: int | None
    iommu_classes: tuple[str, ...]
    modules: Mapping[str, Mapping[str, Any]]
    infiniband: tuple[str, ...] | None
    kernel: str | None
    boot_time: int | None
    image_marker: Mapping[str, Any]
    tools: Mapping[str, ToolRun] = field(default_factory=dict)
    #: the node facts' readings of the bus (sysfs and lspci, see
    #: :meth:`nvtest.session.facts.NodeFacts.bus_text`) when the audit was checked against
    #: them (:func:`nvtest.checks.config.probe.platform`); None: the probe's sysfs alone
    bus_readings: str | None = None

    @property
    def gpus(self) -> tuple[PciFunction, ...]:
        return tuple(d for d in self.devices if d.kind == "gpu")

    @property
    def nics(self) -> tuple[PciFunction, ...]:
        return tuple(d for d in self.devices if d.kind == "nic")

    def tool(self, name: str) -> ToolRun | None:
        return self.tools.get(name)

    def sysfs(self, *parts: str) -> str:
        """A path as the node reads it, for a finding's source (``/sys/...`` under the root)."""
        base = "" if self.root in ("", "/") else self.root.rstrip("/")
        return base + "/" + "/".join(p.strip("/") for p in parts)

    def module_loaded(self, name: str) -> bool:
        return bool((self.modules.get(name) or {}).get("loaded"))


def _tool(raw: Mapping[str, Any]) -> ToolRun:
    return ToolRun(
        cmd=tuple(str(c) for c in raw.get("cmd") or ()),
        rc=raw.get("rc"),
        stdout=str(raw.get("stdout") or ""),
        stderr=str(raw.get("stderr") or ""),
        reason=raw.get("reason"),
    )


def _device(d: Mapping[str, Any]) -> PciFunction:
    return PciFunction(
        bdf=str(d["bdf"]),
        kind=str(d["kind"]),
        vendor=str(d.get("vendor") or ""),
        device=d.get("device"),
        cls=str(d.get("class") or ""),
        numa_node=d.get("numa_node"),
        local_cpus=parse_cpulist(d.get("local_cpulist")),
        iommu_group=d.get("iommu_group"),
        iommu_group_type=d.get("iommu_group_type"),
        driver=d.get("driver"),
        path=tuple(d.get("path") or ()),
    )


def platform_from_probe(doc: Mapping[str, Any]) -> Platform:
    """Build :class:`Platform` from the ``config`` probe's JSON document.

    Raises:
        ValueError, KeyError, TypeError: the document is not a ``config`` probe's.
    """
    if doc.get("probe") != PROBE_NAME:
        raise ValueError(f"not a config probe document: probe={doc.get('probe')!r}")
    iommu = doc.get("iommu") or {}
    ib = doc.get("infiniband")
    return Platform(
        host=str(doc.get("host")),
        root=str(doc.get("root") or "/"),
        devices=tuple(_device(d) for d in doc.get("pci") or ()),
        bridges=dict(doc.get("bridges") or {}),
        numa_nodes={int(k): parse_cpulist(v) for k, v in (doc.get("numa_nodes") or {}).items()},
        cpus_allowed=parse_cpulist(doc.get("cpus_allowed")),
        cmdline=doc.get("cmdline"),
        iommu_groups=iommu.get("groups"),
        iommu_classes=tuple(iommu.get("classes") or ()),
        modules=dict(doc.get("modules") or {}),
        infiniband=None if ib is None else tuple(ib),
        kernel=doc.get("kernel"),
        boot_time=doc.get("boot_time"),
        image_marker=dict(doc.get("image_marker") or {}),
        tools={k: _tool(v) for k, v in (doc.get("raw") or {}).items()},
    )


def bus_source(p: Platform) -> str:
    """The source that proves which GPUs and NICs a node has: the node's readings of the
    bus (sysfs and lspci) where the audit was checked against them, else the probe's sysfs."""
    if p.bus_readings:
        return p.bus_readings
    return p.sysfs("sys/bus/pci/devices") + " (vendor, class)"
