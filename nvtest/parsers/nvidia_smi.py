"""Parser for plain ``nvidia-smi`` (the boxed table), drivers 418 through 580.

Reads the header (``NVIDIA-SMI x  Driver Version: y  CUDA Version: z``, also the newer
``KMD Version``), the GPU table in its old 79-column, 535-era 89-column and 545+ 91-column
layouts (two or three lines per GPU, ``MIG M.`` on the third), the ``MIG devices:`` table
(two lines per MIG device), the processes table, and ``Unable to determine the device handle
for GPU...`` lines naming a GPU nvidia-smi lost. Cells are split on ``|`` so a value glued to
the border (``|ERR!   54C``) still reads. ``ERR!``/``N/A`` become :class:`ValueState`s.

nvidia-smi's own failure outputs (:data:`FAILURES`: ``NVIDIA-SMI has failed because it couldn't
communicate with the NVIDIA driver``, ``Failed to initialize NVML: ...`` with the ``NVML library
version`` line, ``No devices were found``, ``Unable to determine the device handle ...``) give a
record whose ``failure`` holds the tool's words; a GPU table no layout reads is
``unsupported_format``.

Units: temperatures in C, power in W, memory in MiB, utilisation in percent.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from nvtest.parsers._common import (
    FailureKind,
    FailureTable,
    LineDispatch,
    Reading,
    ToolFailure,
    ToolRecord,
    ValueState,
    effective,
    effective_field,
    guarded,
    lost_gpu,
    not_tool_output,
    numbered_lines,
    reading,
    skip_line,
)

TOOL = "nvidia-smi"
DESCRIPTION = "plain nvidia-smi table: per-GPU temp, power, memory, util, ECC, MIG; MIG devices; lost GPUs"

__all__ = ["FAILURES", "SmiMigDevice", "SmiPlain", "SmiPlainGpu", "SmiProcess", "detect", "parse"]

_K = FailureKind

#: nvidia-smi's failure wordings (drivers 418-580; the same text in plain, ``-q``, ``-q -x`` and
#: ``--query-gpu`` mode, which share this table).
FAILURES = FailureTable(
    [
        (
            re.compile(r"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver"),
            _K.INIT_FAILURE,
            "nvidia-smi, driver not loaded (all versions)",
        ),
        (
            re.compile(r"Failed to initialize NVML: (?P<code>.+?)\s*$"),
            _K.INIT_FAILURE,
            "nvidia-smi: NVML init error (Driver/library version mismatch, Unknown Error, ...)",
        ),
        (
            re.compile(r"NVIDIA-SMI couldn't find libnvidia-ml\.so"),
            _K.COULD_NOT_START,
            "nvidia-smi without the NVML library (driver user-space not installed)",
        ),
        (re.compile(r"^No devices were found"), _K.NO_DEVICE, "nvidia-smi, driver sees no GPU"),
        (
            re.compile(
                r"Unable to determine the device handle for (?:GPU|gpu)\s*(?:\d+:\s*)?"
                r"(?P<device>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.?\d?)"
                r"(?::\s*(?P<code>.+?))?\s*$"
            ),
            _K.ERROR_BANNER,
            "nvidia-smi, a GPU it lists but cannot reach (driver 450+)",
        ),
    ],
    binaries=r"nvidia-smi",
)


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
class SmiPlain(ToolRecord):
    """A plain nvidia-smi output."""

    gpus: tuple[SmiPlainGpu, ...]
    driver_version: str | None = None
    cuda_version: str | None = None
    smi_version: str | None = None
    mig_devices: tuple[SmiMigDevice, ...] = ()
    processes: tuple[SmiProcess, ...] = ()
    lost_gpus: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    failure: ToolFailure | None = None
    effective: Mapping[str, object] = effective_field()


_HEADER_RE = re.compile(r"NVIDIA-SMI\s+(\S+)")
_DRIVER_RE = re.compile(r"Driver Version:\s*(\S+)")
_CUDA_RE = re.compile(r"CUDA Version:\s*(\S+)")
_ROW1_RE = re.compile(r"^\s*(\d+)\s+(.+?)\s+(On|Off|N/A)\s*$")
_BUS_RE = re.compile(r"^\s*([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*(\S+)?\s*$")
_ROW2_RE = re.compile(r"^\s*(\S+)\s+(\S+?)C?\s+(P\d+|\S+)\s+(\S+?)W?\s*/\s*(\S+?)W?\s*$")
_MEM_RE = re.compile(r"^\s*(\S+?)(?:MiB)?\s*/\s*(\S+?)(?:MiB)?\s*$")
_PROC_RE = re.compile(r"^\s*(\d+)\s+(\S+)\s+(\S+)\s+(\d+)\s+(\S+)\s+(.+?)\s+(\S+?)(?:MiB)?\s*$")
_ENGINES = ("CE", "ENC", "DEC", "OFA", "JPG")
_ANY_BUS_RE = re.compile(r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]")


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
        self.failure: ToolFailure | None = None
        self.detail: list[str] = []
        self.unread_row: tuple[int, str] | None = None

    def close(self) -> None:
        """Freeze the open GPU row group, if any."""
        if self.cur is not None:
            self.gpus.append(SmiPlainGpu(**self.cur))  # type: ignore[arg-type]
        self.cur = None

    def result(self, text: str) -> SmiPlain:
        """The :class:`SmiPlain`; ParseError when neither a header, a GPU nor a failure was read."""
        self.close()
        failure = self.final_failure()
        if not self.gpus and not self.lost and "driver_version" not in self.info and not failure:
            raise not_tool_output(TOOL, "'NVIDIA-SMI ... Driver Version' header", text)
        warnings = [] if self.gpus or self.lost or failure else ["header without any GPU row"]
        return SmiPlain(
            gpus=tuple(self.gpus),
            mig_devices=tuple(SmiMigDevice(**m) for m in self.migs),  # type: ignore[arg-type]
            processes=tuple(self.procs),
            lost_gpus=tuple(self.lost),
            warnings=tuple(warnings),
            failure=failure,
            effective=effective(
                gpus_reported=len(self.gpus),
                bus_ids=tuple(g.bus_id for g in self.gpus),
                lost_gpus=len(self.lost),
                mig_devices=len(self.migs),
                driver_version=self.info.get("driver_version"),
            ),
            **self.info,
        )

    def final_failure(self) -> ToolFailure | None:
        """The tool's failure (with the lines that followed it), or ``unsupported_format`` for
        a GPU table with bus ids that no layout read."""
        if self.failure is not None:
            if self.detail:
                f = self.failure
                return ToolFailure(f.kind, f.message, f.line, f.code, f.device, tuple(self.detail))
            return self.failure
        if self.unread_row is not None and not self.gpus:
            no, line = self.unread_row
            return ToolFailure(FailureKind.UNSUPPORTED_FORMAT, line, no, "GPU table layout")
        return None

    def lost_gpu(self, no: int, line: str, _m: re.Match[str]) -> bool:
        self.lost.append(lost_gpu(line) or "unknown")
        return False  # the failure rule notes it too

    def failed(self, no: int, line: str, _m: re.Match[str]) -> bool:
        """A line of :data:`FAILURES`: the first becomes the record's failure; declined for a
        line the table does not know (e.g. a prompt)."""
        f = FAILURES.failure(no, line)
        if f is None:
            return False
        if self.failure is None:
            self.failure = f
        return True

    def nvml_version(self, no: int, line: str, _m: re.Match[str]) -> None:
        """``NVML library version: 570.124``, printed after a version mismatch."""
        self.detail.append(line)

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
            if self.unread_row is None and _ANY_BUS_RE.search(line):
                self.unread_row = (no, line)
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
        (lambda s: FAILURES.match(s) is not None, _Reader.failed),
        ("NVML library version", _Reader.nvml_version),
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

    nvidia-smi's own failure messages (``NVIDIA-SMI has failed ...``, ``No devices were found``,
    ...) give a record with ``failure`` set, not an error.

    Raises:
        ParseError: the text is not nvidia-smi's: no ``NVIDIA-SMI`` header, GPU row, lost-GPU line
            or failure message of :data:`FAILURES`.
    """
    reader = _Reader()
    for no, line in numbered_lines(text):
        s = line.strip()
        if s:
            _LINES(reader, no, s)
    return reader.result(text)


def detect(text: str) -> bool:
    """True when ``text`` looks like the plain nvidia-smi table."""
    head = text[:5000]
    if "NVIDIA-SMI" in head and "Driver Version" in head:
        return True
    if "<nvidia_smi_log" in head or "Attached GPUs" in head:
        return False
    lines = [ln for ln in head.splitlines() if ln.strip()]
    return any(FAILURES.match(ln.strip()) for ln in lines[:6]) and "," not in head
