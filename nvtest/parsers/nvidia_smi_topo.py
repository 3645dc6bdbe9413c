"""Parser for ``nvidia-smi topo -m`` (drivers 418-580): the GPU/NIC connection matrix.

Reads the header (``GPU0 ... NIC0 ... CPU Affinity  NUMA Affinity  GPU NUMA ID``; older
drivers name NIC columns ``mlx5_0``), one row per device with a cell per device column (``X``,
``NV#``, ``PIX``, ``PXB``, ``PHB``, ``NODE``, ``SYS``), the affinity columns of GPU rows, and
the ``NIC Legend`` (``NIC0: mlx5_0``). The legend of link kinds is skipped. nvidia-smi's
failure lines (the shared :data:`~nvtest.parsers.nvidia_smi.FAILURES`) set ``failure``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from nvtest.parsers._common import (
    ParseError,
    ToolFailure,
    ToolRecord,
    effective,
    effective_field,
    guarded,
    not_tool_output,
    numbered_lines,
)
from nvtest.parsers.nvidia_smi import FAILURES

TOOL = "nvidia-smi-topo"
DESCRIPTION = "nvidia-smi topo -m: GPU/NIC link matrix (NV#, PIX, PXB, PHB, NODE, SYS), CPU/NUMA affinity, NIC legend"

__all__ = ["FAILURES", "SmiTopology", "TopoAffinity", "detect", "parse"]

LINK_KINDS = ("X", "PIX", "PXB", "PHB", "NODE", "SYS", "SOC")
_DEVICE_RE = re.compile(r"^(GPU\d+|NIC\d+|mlx\d+_\d+|\w+_\d+)$")
_CELL_RE = re.compile(r"^(X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC)$")


@dataclass(frozen=True)
class TopoAffinity:
    """Affinity columns of one device row (as printed; ``N/A`` kept)."""

    device: str
    cpu_affinity: str | None = None
    numa_affinity: str | None = None
    gpu_numa_id: str | None = None


@dataclass(frozen=True)
class SmiTopology(ToolRecord):
    """``matrix[i][j]`` is the link from ``devices[i]`` to ``devices[j]``."""

    devices: tuple[str, ...]
    matrix: tuple[tuple[str, ...], ...]
    affinity: tuple[TopoAffinity, ...] = ()
    nic_names: tuple[tuple[str, str], ...] = ()
    warnings: tuple[str, ...] = ()
    failure: ToolFailure | None = None
    effective: Mapping[str, object] = effective_field()

    def link(self, a: str, b: str) -> str | None:
        """The link kind between devices ``a`` and ``b`` (e.g. ``"NV12"``), None if unknown."""
        if a not in self.devices or b not in self.devices:
            return None
        row = self.matrix[self.devices.index(a)]
        j = self.devices.index(b)
        return row[j] if j < len(row) else None

    @property
    def gpus(self) -> tuple[str, ...]:
        """GPU device names."""
        return tuple(d for d in self.devices if d.startswith("GPU"))

    @property
    def nics(self) -> tuple[str, ...]:
        """NIC device names (``NICn`` or ``mlx5_n``)."""
        return tuple(d for d in self.devices if not d.startswith("GPU"))

    def nic_name(self, nic: str) -> str:
        """``"NIC5"`` -> ``"mlx5_5"`` through the legend (the name itself when absent)."""
        return dict(self.nic_names).get(nic, nic)


@guarded(TOOL)
def parse(text: str) -> SmiTopology:
    """Parse ``nvidia-smi topo -m`` into an :class:`SmiTopology`.

    Raises:
        ParseError: no header of device columns, or a row with fewer cells than devices.
    """
    devices: list[str] | None = None
    rows: list[tuple[str, ...]] = []
    names: list[str] = []
    affinity: list[TopoAffinity] = []
    legend: list[tuple[str, str]] = []
    warnings: list[str] = []
    in_legend = False
    failure: ToolFailure | None = None
    for no, line in numbered_lines(text):
        s = line.strip()
        if not s:
            continue
        # matrix rows (GPU0 ..., NIC3 ...) are no failure line; skip the table search there
        f = None if s.startswith(("GPU", "NIC")) else FAILURES.failure(no, s)
        if f is not None:
            failure = failure or f
            continue
        if s.startswith("Legend") or s.startswith("NIC Legend"):
            in_legend = True
            continue
        toks = s.split()
        if in_legend:
            m = re.match(r"^(NIC\d+):\s*(\S+)$", s)
            if m:
                legend.append((m.group(1), m.group(2)))
            continue
        if devices is None:
            if toks and toks[0].startswith("GPU") and _DEVICE_RE.match(toks[0]):
                devices = []
                for t in toks:
                    if not _DEVICE_RE.match(t):
                        break
                    devices.append(t)
            continue
        if not _DEVICE_RE.match(toks[0]):
            continue
        cells = toks[1 : 1 + len(devices)]
        if len(cells) < len(devices) or not all(_CELL_RE.match(c) for c in cells):
            raise ParseError(
                TOOL,
                f"row {toks[0]} has unreadable cells",
                line=no,
                expected=f"{len(devices)} link cells",
            )
        names.append(toks[0])
        rows.append(tuple(cells))
        rest = toks[1 + len(devices) :]
        if rest:
            vals = dict(zip(("cpu_affinity", "numa_affinity", "gpu_numa_id"), rest, strict=False))
            affinity.append(TopoAffinity(toks[0], **vals))
    if (devices is None or not rows) and failure is None:
        raise not_tool_output(TOOL, "a header 'GPU0 GPU1 ...' and device rows", text)
    devices = devices or []
    if names != devices[: len(names)]:
        warnings.append("row order differs from column order")
    if rows and len(rows) < len(devices):
        warnings.append(f"{len(devices)} columns but {len(rows)} rows (output cut?)")
    return SmiTopology(
        tuple(names),
        tuple(rows),
        tuple(affinity),
        tuple(legend),
        tuple(warnings),
        failure,
        effective(devices=tuple(names)),
    )


def detect(text: str) -> bool:
    """True when ``text`` looks like ``nvidia-smi topo -m``."""
    head = text[:20000]
    return bool(re.search(r"^\s+GPU0\s+(GPU1|NIC0|mlx\S+|CPU Affinity)", head, re.M)) and (" X " in head)
