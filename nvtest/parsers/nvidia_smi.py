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
    LineDispatch,
    ParseError,
    Reading,
    ValueState,
    guarded,
    lost_gpu,
    numbered_lines,
    reading,
    skip_line,
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


class _Reader:
    """The table read so far; the handlers of :data:`_LINES`. ``section`` is the table the
    ``|`` rows belong to (``gpus``, ``mig``, ``procs``); ``line_in_gpu`` counts the rows of the
    open GPU's row group."""

    def __init__(self) -> None:
        self.info: dict[str, str] = {}
        self.gpus: list[SmiPlainGpu] = []
        self.migs: list[dict[str, object]] = []
        self.procs: list[SmiProcess] = []
        self.lost: list[str] = []
        self.section = "gpus"
        self.cur: dict[str, object] | None = None
        self.line_in_gpu = 0

    def close(self) -> None:
        """Freeze the open GPU row group, if any."""
        if self.cur is not None:
            self.gpus.append(SmiPlainGpu(**self.cur))  # type: ignore[arg-type]
        self.cur = None

    def result(self) -> SmiPlain:
        """The :class:`SmiPlain`; ParseError when neither a header nor a GPU was read."""
        self.close()
        if not self.gpus and not self.lost and "driver_version" not in self.info:
            raise ParseError(
                TOOL, "no nvidia-smi table found", expected="'NVIDIA-SMI ... Driver Version' header"
            )
        warnings = [] if self.gpus or self.lost else ["header without any GPU row"]
        return SmiPlain(
            gpus=tuple(self.gpus),
            mig_devices=tuple(SmiMigDevice(**m) for m in self.migs),  # type: ignore[arg-type]
            processes=tuple(self.procs),
            lost_gpus=tuple(self.lost),
            warnings=tuple(warnings),
            **self.info,
        )

    def lost_gpu(self, no: int, line: str, _m: re.Match[str]) -> None:
        self.lost.append(lost_gpu(line) or "unknown")

    def failed(self, no: int, line: str, _m: re.Match[str]) -> None:
        raise ParseError(TOOL, line, line=no, expected="the GPU table")

    def header(self, no: int, line: str, _m: re.Match[str]) -> None:
        for key, rx in (
            ("smi_version", _HEADER_RE),
            ("driver_version", _DRIVER_RE),
            ("cuda_version", _CUDA_RE),
        ):
            m = rx.search(line)
            if m:
                self.info[key] = m.group(1)

    def mig_section(self, no: int, line: str, _m: re.Match[str]) -> None:
        self.close()
        self.section = "mig"

    def procs_section(self, no: int, line: str, _m: re.Match[str]) -> None:
        self.close()
        self.section = "procs"

    def row(self, no: int, line: str, _m: re.Match[str]) -> None:
        """A ``|`` row of the current section's table."""
        cells = _cells(line)
        if self.section == "gpus" and len(cells) >= 3:
            self.gpu_row(cells)
        elif self.section == "mig" and len(cells) >= 3:
            row = _mig_row(cells)
            if row is not None:
                self.migs.append(row)
            elif self.migs and not cells[0].strip():
                self.migs[-1]["bar1_used_mib"], self.migs[-1]["bar1_total_mib"] = _mem(cells[1])
        elif self.section == "procs" and cells:
            self.proc_row(cells)

    def gpu_row(self, cells: list[str]) -> None:
        """Row 1 of a GPU (index, name, bus id) opens it; rows 2 and 3 fill it."""
        m1 = _ROW1_RE.match(cells[0])
        mb = _BUS_RE.match(cells[1])
        if m1 and mb:
            self.close()
            ecc = cells[2].strip()
            self.cur = {
                "index": int(m1.group(1)),
                "name": m1.group(2),
                "persistence_mode": m1.group(3),
                "bus_id": mb.group(1),
                "display_active": mb.group(2),
                "ecc_uncorrectable": reading(ecc) if reading(ecc) is not None else ecc,
            }
            self.line_in_gpu = 1
        elif self.cur is not None and self.line_in_gpu == 1:
            _gpu_line2(self.cur, cells)
            self.line_in_gpu = 2
        elif self.cur is not None and self.line_in_gpu == 2:
            mig = cells[2].strip()
            if mig:
                self.cur["mig_mode"] = mig
            self.line_in_gpu = 3

    def proc_row(self, cells: list[str]) -> None:
        m = _PROC_RE.match(cells[0])
        if m:
            self.procs.append(
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

    def other(self, no: int, line: str) -> None:
        """Any other line; a ``+---`` border ends the open GPU's row group."""
        if line.startswith("+") and self.section == "gpus":
            self.close()


#: Every non-blank line, stripped.
_LINES: LineDispatch[_Reader] = LineDispatch(
    [
        (re.compile("Unable to determine the device handle"), _Reader.lost_gpu),
        (("NVIDIA-SMI has failed", "No devices were found"), _Reader.failed),
        (lambda s: "NVIDIA-SMI" in s and "Version" in s, _Reader.header),
        (re.compile("MIG devices:"), _Reader.mig_section),
        (re.compile("Processes:"), _Reader.procs_section),
        (("|=", "|-"), skip_line),
        ("|", _Reader.row),
    ],
    default=_Reader.other,
)


@guarded(TOOL)
def parse(text: str) -> SmiPlain:
    """Parse plain ``nvidia-smi`` output into an :class:`SmiPlain`.

    Raises:
        ParseError: no ``NVIDIA-SMI`` header, no GPU row and no lost-GPU line; or nvidia-smi's own
            failure message (``NVIDIA-SMI has failed ...``, ``No devices were found``).
    """
    reader = _Reader()
    for no, line in numbered_lines(text):
        s = line.strip()
        if s:
            _LINES(reader, no, s)
    return reader.result()


def detect(text: str) -> bool:
    """True when ``text`` looks like the plain nvidia-smi table."""
    head = text[:5000]
    return ("NVIDIA-SMI" in head and "Driver Version" in head) or (
        "Unable to determine the device handle" in head and "," not in head
    )
