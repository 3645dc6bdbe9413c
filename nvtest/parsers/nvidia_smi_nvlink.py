"""Parser for ``nvidia-smi nvlink -s`` (status of each NVLink), drivers 418-580.

Reads ``GPU N: NAME (UUID: ...)`` blocks and their ``Link L: 25.781 GB/s`` lines; inactive
links are printed ``<inactive>`` by older drivers and ``Inactive`` by newer ones, and both are
read as inactive (speed None). Lines elided by the poster (``....``) are ignored. nvidia-smi's
failure lines (:data:`FAILURES`: the shared nvidia-smi table plus ``NVML: Unable to retrieve
NVLink information as all links are inActive``) set ``failure``.

Units: per-link speed in GB/s as printed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from nvtest.parsers import nvidia_smi
from nvtest.parsers._common import (
    FailureKind,
    FailureTable,
    ToolFailure,
    ToolRecord,
    effective,
    effective_field,
    guarded,
    not_tool_output,
    numbered_lines,
    to_float,
)

TOOL = "nvidia-smi-nvlink"
DESCRIPTION = "nvidia-smi nvlink -s: per-GPU, per-link speed (GB/s) and inactive links"

__all__ = ["FAILURES", "NvLink", "NvLinkGpu", "NvLinkStatus", "detect", "parse"]

#: nvidia-smi's failure wordings, and the one ``nvlink -s`` prints for a GPU whose links are all
#: down (drivers 535-590).
FAILURES = FailureTable(
    [
        *nvidia_smi.FAILURES.rules,
        (
            re.compile(r"NVML:\s*Unable to retrieve NVLink information as all links are inActive", re.I),
            FailureKind.ERROR_BANNER,
            "nvidia-smi nvlink -s, every link of a GPU down",
        ),
    ],
    binaries=r"nvidia-smi",
)


@dataclass(frozen=True)
class NvLink:
    """One link: ``speed_gbps`` None when inactive or unreadable; ``state`` as printed when not a speed."""

    link: int
    speed_gbps: float | None
    active: bool
    state: str | None = None


@dataclass(frozen=True)
class NvLinkGpu:
    """One GPU and its links."""

    index: int
    name: str | None
    uuid: str | None
    links: tuple[NvLink, ...]

    @property
    def inactive_links(self) -> tuple[int, ...]:
        """Link numbers that are not active."""
        return tuple(lk.link for lk in self.links if not lk.active)

    @property
    def active_count(self) -> int:
        """Number of active links."""
        return sum(1 for lk in self.links if lk.active)


@dataclass(frozen=True)
class NvLinkStatus(ToolRecord):
    """All GPUs of one ``nvlink -s`` output."""

    gpus: tuple[NvLinkGpu, ...]
    warnings: tuple[str, ...] = ()
    failure: ToolFailure | None = None
    effective: Mapping[str, object] = effective_field()


_GPU_RE = re.compile(r"^GPU (\d+):\s*(.*?)(?:\s*\(UUID:\s*([^)]*)\))?\s*$")
_LINK_RE = re.compile(r"^Link (\d+):\s*(.*)$")


@guarded(TOOL)
def parse(text: str) -> NvLinkStatus:
    """Parse ``nvidia-smi nvlink -s`` into an :class:`NvLinkStatus`.

    Raises:
        ParseError: no link line and no failure line of
            :data:`FAILURES` (GPU lines alone are ``nvidia-smi -L``'s, or gpu-burn's).
    """
    gpus: list[NvLinkGpu] = []
    warnings: list[str] = []
    cur: tuple[int, str | None, str | None] | None = None
    links: list[NvLink] = []
    failure: ToolFailure | None = None

    def close() -> None:
        if cur is not None:
            gpus.append(NvLinkGpu(cur[0], cur[1], cur[2], tuple(links)))

    for no, line in numbered_lines(text):
        s = line.strip()
        failure = failure or FAILURES.failure(no, s)
        m = _GPU_RE.match(s)
        if m:
            close()
            cur = (int(m.group(1)), m.group(2) or None, m.group(3))
            links = []
            continue
        m = _LINK_RE.match(s)
        if m:
            if cur is None:  # a paste cut at the start: the link's GPU is not shown
                warnings.append(f"line {no}: link line before any GPU line (output cut): skipped")
                continue
            value = m.group(2).strip()
            speed = to_float(value) if "GB/s" in value else None
            if speed is not None:
                links.append(NvLink(int(m.group(1)), speed, True))
            else:
                state = value.strip("<>").strip()
                if state.lower() != "inactive":
                    warnings.append(f"line {no}: link {m.group(1)} reads {value!r}")
                links.append(NvLink(int(m.group(1)), None, False, state or None))
    close()
    if failure is None and not any(g.links for g in gpus):
        raise not_tool_output(TOOL, "GPU N: <name> (UUID: ...) and Link lines", text)
    return NvLinkStatus(
        tuple(gpus),
        tuple(warnings),
        failure,
        effective(gpus=len(gpus), links=sum(len(g.links) for g in gpus)),
    )


def detect(text: str) -> bool:
    """True when ``text`` looks like ``nvidia-smi nvlink -s``."""
    head = text[:20000]
    return bool(re.search(r"^\s*Link \d+:\s*(?:[\d.]+ GB/s|<inactive>|Inactive)", head, re.M))
