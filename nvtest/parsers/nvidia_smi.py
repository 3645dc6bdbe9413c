"""Parser for plain ``nvidia-smi`` (the boxed table), drivers 418 through 580.

Reads the header (``NVIDIA-SMI x  Driver Version: y  CUDA Version: z``, also the newer
``KMD Version``), the GPU table in its old 79-column, 535-era 89-column and 545+ 91-column
layouts (two or three lines per GPU, ``MIG M.`` on the third), the ``MIG devices:`` table
(two lines per MIG device), the processes table, and ``Unable to determine the device handle
for GPU...`` lines naming a GPU nvidia-smi lost. Cells are split on ``|`` so a value glued to
the border (``|ERR!   54C``) still reads. ``ERR!``/``N/A`` become :class:`ValueState`s.

Units: temperatures in C, power in W, memory in MiB, utilisation in percent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from nvtest.parsers._common import (
    ParseError,
    Reading,
    ValueState,
    guarded,
    lost_gpu,
    numbered_lines,
    reading,
)

TOOL = "nvidia-smi"
DESCRIPTION = (
    "plain nvidia-smi table: per-GPU temp, power, memory, util, ECC, MIG; MIG devices; lost GPUs"
)

__all__ = ["SmiMigDevice", "SmiPlain", "SmiPlainGpu", "SmiProcess", "detect", "parse"]


@dataclass(frozen=True)
class SmiPlainGpu:
    """One GPU row group. Numbers or :class:`ValueState` (``ERR!`` -> ERROR, ``N/A`` -> NA)."""

    index: int
    name: str
    bus_id: str
    persistence_mode: str | None = None
    display_active: str | None = None
    ecc_uncorrectable: Reading | str | None = None
    fan_pct: Reading | None = None
    temperature_c: Reading | None = None
    performance_state: str | None = None
    power_draw_w: Reading | None = None
    power_cap_w: Reading | None = None
    memory_used_mib: Reading | None = None
    memory_total_mib: Reading | None = None
    utilization_pct: Reading | None = None
    compute_mode: str | None = None
    mig_mode: str | None = None

    @property
    def faults(self) -> tuple[str, ...]:
        """Names of the fields showing a fault state (ERR!, reset required, unknown error)."""
        return tuple(
            name
            for name in (
                "fan_pct",
                "temperature_c",
                "power_draw_w",
                "memory_used_mib",
                "utilization_pct",
                "ecc_uncorrectable",
            )
            if isinstance(v := getattr(self, name), ValueState) and v.is_fault
        )

    @property
    def healthy(self) -> bool:
        """False when any field shows a fault state."""
        return not self.faults


@dataclass(frozen=True)
class SmiMigDevice:
    """One row of the ``MIG devices:`` table (memory in MiB)."""

    gpu: int
    gi_id: int
    ci_id: int
    mig_dev: int
    memory_used_mib: Reading | None = None
    memory_total_mib: Reading | None = None
    bar1_used_mib: Reading | None = None
    bar1_total_mib: Reading | None = None
    sm_count: int | None = None
    engines: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class SmiProcess:
    """One row of the processes table."""

    gpu: int
    pid: int
    type: str
    name: str
    memory_mib: Reading | None = None
    gi_id: str | None = None
    ci_id: str | None = None


@dataclass(frozen=True)
class SmiPlain:
    """A plain nvidia-smi output."""

    gpus: tuple[SmiPlainGpu, ...]
    driver_version: str | None = None
    cuda_version: str | None = None
    smi_version: str | None = None
    mig_devices: tuple[SmiMigDevice, ...] = ()
    processes: tuple[SmiProcess, ...] = ()
    lost_gpus: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()


_HEADER_RE = re.compile(r"NVIDIA-SMI\s+(\S+)")
_DRIVER_RE = re.compile(r"Driver Version:\s*(\S+)")
_CUDA_RE = re.compile(r"CUDA Version:\s*(\S+)")
_ROW1_RE = re.compile(r"^\s*(\d+)\s+(.+?)\s+(On|Off|N/A)\s*$")
_BUS_RE = re.compile(r"^\s*([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*(\S+)?\s*$")
_ROW2_RE = re.compile(r"^\s*(\S+)\s+(\S+?)C?\s+(P\d+|\S+)\s+(\S+?)W?\s*/\s*(\S+?)W?\s*$")
_MEM_RE = re.compile(r"^\s*(\S+?)(?:MiB)?\s*/\s*(\S+?)(?:MiB)?\s*$")
_PROC_RE = re.compile(r"^\s*(\d+)\s+(\S+)\s+(\S+)\s+(\d+)\s+(\S+)\s+(.+?)\s+(\S+?)(?:MiB)?\s*$")
_ENGINES = ("CE", "ENC", "DEC", "OFA", "JPG")


def _cells(line: str) -> list[str]:
    parts = line.strip().split("|")
    return parts[1:-1] if len(parts) > 2 else parts[1:]


def _mem(cell: str) -> tuple[Reading | None, Reading | None]:
    m = _MEM_RE.match(cell)
    if not m:
        return None, None
    return reading(m.group(1)), reading(m.group(2))


def _gpu_line2(f: dict[str, object], cells: list[str]) -> None:
    m = _ROW2_RE.match(cells[0])
    if m:
        f["fan_pct"] = reading(m.group(1))
        f["temperature_c"] = reading(m.group(2))
        f["performance_state"] = m.group(3)
        f["power_draw_w"] = reading(m.group(4))
        f["power_cap_w"] = reading(m.group(5))
    f["memory_used_mib"], f["memory_total_mib"] = _mem(cells[1])
    parts = cells[2].split()
    if parts:
        f["utilization_pct"] = reading(parts[0])
        if len(parts) > 1:
            f["compute_mode"] = " ".join(parts[1:])


def _mig_row(cells: list[str]) -> dict[str, object] | None:
    ids = cells[0].split()
    if len(ids) != 4 or not all(i.isdigit() for i in ids):
        return None
    used, total = _mem(cells[1])
    sm = cells[2].split()
    eng = cells[3].split() if len(cells) > 3 else []
    return {
        "gpu": int(ids[0]),
        "gi_id": int(ids[1]),
        "ci_id": int(ids[2]),
        "mig_dev": int(ids[3]),
        "memory_used_mib": used,
        "memory_total_mib": total,
        "sm_count": int(sm[0]) if sm and sm[0].isdigit() else None,
        "engines": tuple((n, int(v)) for n, v in zip(_ENGINES, eng, strict=False) if v.isdigit()),
    }


@guarded(TOOL)
def parse(text: str) -> SmiPlain:
    """Parse plain ``nvidia-smi`` output into an :class:`SmiPlain`.

    Raises:
        ParseError: no ``NVIDIA-SMI`` header, no GPU row and no lost-GPU line; or nvidia-smi's own
            failure message (``NVIDIA-SMI has failed ...``, ``No devices were found``).
    """
    info: dict[str, str] = {}
    gpus: list[SmiPlainGpu] = []
    migs: list[dict[str, object]] = []
    procs: list[SmiProcess] = []
    lost: list[str] = []
    warnings: list[str] = []
    section = "gpus"
    cur: dict[str, object] | None = None
    line_in_gpu = 0

    def close() -> None:
        nonlocal cur
        if cur is not None:
            gpus.append(SmiPlainGpu(**cur))  # type: ignore[arg-type]
        cur = None

    for no, line in numbered_lines(text):
        s = line.strip()
        lg = lost_gpu(s)
        if lg:
            lost.append(lg)
            continue
        if s.startswith(("NVIDIA-SMI has failed", "No devices were found")):
            raise ParseError(TOOL, s, line=no, expected="the GPU table")
        if "NVIDIA-SMI" in s and "Version" in s:
            for key, rx in (
                ("smi_version", _HEADER_RE),
                ("driver_version", _DRIVER_RE),
                ("cuda_version", _CUDA_RE),
            ):
                m = rx.search(s)
                if m:
                    info[key] = m.group(1)
            continue
        if "MIG devices:" in s:
            close()
            section = "mig"
            continue
        if "Processes:" in s:
            close()
            section = "procs"
            continue
        if not s.startswith("|") or s.startswith("|=") or s.startswith("|-"):
            if s.startswith("+") and section == "gpus":
                close()
            continue
        cells = _cells(s)
        if section == "gpus" and len(cells) >= 3:
            m1 = _ROW1_RE.match(cells[0])
            mb = _BUS_RE.match(cells[1])
            if m1 and mb:
                close()
                cur = {
                    "index": int(m1.group(1)),
                    "name": m1.group(2),
                    "persistence_mode": m1.group(3),
                    "bus_id": mb.group(1),
                    "display_active": mb.group(2),
                }
                ecc = cells[2].strip()
                cur["ecc_uncorrectable"] = reading(ecc) if reading(ecc) is not None else ecc
                line_in_gpu = 1
                continue
            if cur is not None and line_in_gpu == 1:
                _gpu_line2(cur, cells)
                line_in_gpu = 2
                continue
            if cur is not None and line_in_gpu == 2:
                mig = cells[2].strip()
                if mig:
                    cur["mig_mode"] = mig
                line_in_gpu = 3
            continue
        if section == "mig" and len(cells) >= 3:
            row = _mig_row(cells)
            if row is not None:
                migs.append(row)
            elif migs and not cells[0].strip():
                migs[-1]["bar1_used_mib"], migs[-1]["bar1_total_mib"] = _mem(cells[1])
            continue
        if section == "procs" and cells:
            m = _PROC_RE.match(cells[0])
            if m:
                procs.append(
                    SmiProcess(
                        int(m.group(1)),
                        int(m.group(4)),
                        m.group(5),
                        m.group(6),
                        reading(m.group(7)),
                        m.group(2),
                        m.group(3),
                    )
                )
    close()
    if not gpus and not lost and "driver_version" not in info:
        raise ParseError(
            TOOL, "no nvidia-smi table found", expected="'NVIDIA-SMI ... Driver Version' header"
        )
    if not gpus and not lost:
        warnings.append("header without any GPU row")
    return SmiPlain(
        gpus=tuple(gpus),
        mig_devices=tuple(SmiMigDevice(**m) for m in migs),  # type: ignore[arg-type]
        processes=tuple(procs),
        lost_gpus=tuple(lost),
        warnings=tuple(warnings),
        **info,
    )


def detect(text: str) -> bool:
    """True when ``text`` looks like the plain nvidia-smi table."""
    head = text[:5000]
    return ("NVIDIA-SMI" in head and "Driver Version" in head) or (
        "Unable to determine the device handle" in head and "," not in head
    )
