"""Parser for nvbandwidth (NVIDIA/nvbandwidth) text output, v0.4 through v0.10.

Reads the version banner (``nvbandwidth Version``, CUDA runtime/driver versions, in the v0.8
``12080`` and v0.10 ``13.3 (13030)`` spellings, driver version), the device lines, and one
:class:`NvbTestCase` per ``Running <testcase>.`` block with its matrices (``memcpy CE
CPU(row) -> GPU(column) bandwidth (GB/s)`` title, column header, rows; ``N/A`` diagonal kept as
None), ``SUM <name> <value>`` and v0.10 ``COEFFICIENT_OF_VARIATION <name> <value>`` lines.
Bidirectional device-to-device testcases print several matrices (Read1, Read2, Total), each
with its own suffixed SUM. ``Waived:`` lines (testcases skipped on this system) are counted.

Multinode builds print ``Process N (host): device D: NAME (BUS)`` instead of ``Device N``; both
give :class:`NvbDevice`.

Failures (:data:`FAILURES`): a CUDA error in an expression (``[CUDA_ERROR_NOT_PERMITTED] ...
in expression cuMemCreate(...)``), a failed pattern check (``Invalid value when checking the
pattern``, ``ASSERT in expression h_errorFlag == 0``), an abort (``Aborted (core dumped)``): ``crash_after_partial_output`` once a testcase was running, else
``init_failure``. A testcase whose ``Running`` line is followed by no matrix and no error, at
the end of the output, is a cut run (``crash_after_partial_output``, code ``no matrix``).
``effective``: the testcases run, how many were waived, the devices listed.

Units: each matrix carries its unit as printed: ``GB/s`` (bandwidth) or ``ns`` (latency).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from nvtest.parsers._common import (
    FailureKind,
    FailureTable,
    LineDispatch,
    ParseError,
    ToolFailure,
    ToolRecord,
    effective,
    effective_field,
    guarded,
    not_tool_output,
    numbered_lines,
    to_float,
)

TOOL = "nvbandwidth"
DESCRIPTION = "nvbandwidth: per-testcase bandwidth (GB/s) or latency (ns) matrices, SUM and CoV lines"

__all__ = [
    "FAILURES",
    "NvbDevice",
    "NvbMatrix",
    "NvbTestCase",
    "NvbandwidthResult",
    "detect",
    "parse",
]

_CRASH = FailureKind.CRASH_AFTER_PARTIAL_OUTPUT

#: nvbandwidth's failure wordings (v0.4-v0.10); kind ``init_failure`` before the first testcase.
#: nvbandwidth's own NOTE lines (its banner), passed over on purpose: not a poster's.
OWN_SENTENCES = re.compile(r"^(?:Additional system-specific tuning|Performance can vary with software drivers)")

FAILURES = FailureTable(
    [
        (
            re.compile(r"\[(?P<code>CUDA_ERROR_\w+)\] .* in expression"),
            _CRASH,
            "nvbandwidth CUDA_ASSERT (error_handling.h)",
        ),
        (
            re.compile(r"Invalid value when checking the pattern"),
            _CRASH,
            "nvbandwidth memcmpPattern",
        ),
        (re.compile(r"ASSERT in expression (?P<code>.+?) in "), _CRASH, "nvbandwidth ASSERT"),
        (
            re.compile(r"^(?P<code>Aborted|Segmentation fault)(?: \(core dumped\))?$"),
            _CRASH,
            "the shell, after nvbandwidth printed its banner",
        ),
    ],
    binaries=r"nvbandwidth",
)
NO_MATRIX = "no matrix"


@dataclass(frozen=True)
class NvbMatrix:
    """One matrix: ``cells[i][j]`` is row ``row_ids[i]``, column ``col_ids[j]``; None for N/A."""

    title: str
    unit: str
    col_ids: tuple[int, ...]
    row_ids: tuple[int, ...]
    cells: tuple[tuple[float | None, ...], ...]
    sum_name: str | None = None
    sum_value: float | None = None
    coefficient_of_variation: float | None = None

    @property
    def values(self) -> tuple[float, ...]:
        """All numeric cells, row by row."""
        return tuple(v for row in self.cells for v in row if v is not None)

    @property
    def min_value(self) -> float | None:
        """Smallest numeric cell (the weakest link for bandwidth), in :attr:`unit`."""
        return min(self.values, default=None)


@dataclass(frozen=True)
class NvbTestCase:
    """One ``Running <name>.`` block and its matrices."""

    name: str
    matrices: tuple[NvbMatrix, ...]

    @property
    def unit(self) -> str | None:
        """Unit of the first matrix (``GB/s`` or ``ns``)."""
        return self.matrices[0].unit if self.matrices else None

    @property
    def sum_value(self) -> float | None:
        """SUM of the last matrix (the Total one for bidirectional testcases), in :attr:`unit`."""
        return self.matrices[-1].sum_value if self.matrices else None


@dataclass(frozen=True)
class NvbDevice:
    """A ``Device N: NAME (BUS)`` line."""

    index: int
    name: str
    bus_id: str | None


@dataclass(frozen=True)
class NvbandwidthResult(ToolRecord):
    """A whole nvbandwidth run."""

    testcases: tuple[NvbTestCase, ...]
    version: str | None = None
    cuda_runtime_version: str | None = None
    cuda_driver_version: str | None = None
    driver_version: str | None = None
    hostname: str | None = None
    devices: tuple[NvbDevice, ...] = ()
    waived: int = 0
    warnings: tuple[str, ...] = ()
    failure: ToolFailure | None = None
    effective: Mapping[str, object] = effective_field()

    def testcase(self, name: str) -> NvbTestCase | None:
        """The testcase called ``name``, or None."""
        return next((t for t in self.testcases if t.name == name), None)

    #: The copy-engine testcases between the host and each GPU that nvtest judges, by
    #: direction (the h2d check's ``<direction>_gbps``; nvbandwidth v0.8+ names).
    HOST_COPY_CE: ClassVar[Mapping[str, str]] = {
        "h2d": "host_to_device_memcpy_ce",
        "d2h": "device_to_host_memcpy_ce",
        "bidir": "host_to_device_bidirectional_memcpy_ce",
    }
    #: The device-to-device read testcase whose slowest peer per GPU nvtest judges.
    PEER_READ_CE: ClassVar[str] = "device_to_device_memcpy_read_ce"

    def host_copies(self) -> list[tuple[str, int, float]]:
        """(direction, GPU index, GB/s) of every GPU in each :data:`HOST_COPY_CE` testcase
        that ran, direction by direction (``h2d``, ``d2h``, ``bidir``)."""
        return [(d, gpu, v) for d, case in self.HOST_COPY_CE.items() for gpu, v in self.per_gpu(case)]

    def slowest_peer_reads(self) -> list[tuple[int, float]]:
        """(GPU index, GB/s) per reading GPU of :data:`PEER_READ_CE`'s first matrix: the
        lowest read bandwidth from any other GPU (N/A cells and the diagonal left out; a GPU
        with no such cell is left out); [] when the testcase did not run."""
        peer = self.testcase(self.PEER_READ_CE)
        if peer is None or not peer.matrices:
            return []
        m = peer.matrices[0]
        out = []
        for src, row in zip(m.row_ids, m.cells, strict=False):
            values = [v for dst, v in zip(m.col_ids, row, strict=False) if v is not None and dst != src]
            if values:
                out.append((src, min(values)))
        return out

    def per_gpu(self, name: str) -> list[tuple[int, float]]:
        """(GPU index, value) of each numeric cell of testcase ``name``'s first matrix, row by
        row (a host<->device testcase has one row, a column per GPU); [] when it did not run."""
        tc = self.testcase(name)
        if tc is None or not tc.matrices:
            return []
        m = tc.matrices[0]
        return [(gpu, v) for row in m.cells for gpu, v in zip(m.col_ids, row, strict=False) if v is not None]


_TITLE_RE = re.compile(r"^(.*?)\s*\((GB/s|ns|us|MB/s)\)\s*$")
_DEVICE_RE = re.compile(r"^Device (\d+): (.+?)(?: \(([0-9A-Fa-f:.]+)\))?$")
_PROCESS_RE = re.compile(r"^Process \d+ \(([^)]*)\): device (\d+): (.+?)(?: \(([0-9A-Fa-f:.]+)\))?$")
_VERSION_KEYS = {
    "nvbandwidth Version": "version",
    "CUDA Runtime Version": "cuda_runtime_version",
    "CUDA Driver Version": "cuda_driver_version",
    "CUDA Driver Version (API)": "cuda_driver_version",
    "Driver Version": "driver_version",
}


class _Matrix:
    def __init__(self, title: str, unit: str) -> None:
        self.title, self.unit = title, unit
        self.cols: tuple[int, ...] | None = None
        self.rows: list[int] = []
        self.cells: list[tuple[float | None, ...]] = []
        self.sum: tuple[str, float | None] | None = None
        self.cov: float | None = None

    def build(self) -> NvbMatrix:
        return NvbMatrix(
            self.title,
            self.unit,
            self.cols or (),
            tuple(self.rows),
            tuple(self.cells),
            self.sum[0] if self.sum else None,
            self.sum[1] if self.sum else None,
            self.cov,
        )


class _Reader:
    """The run read so far and the open testcase and matrix; the handlers of :data:`_LINES`."""

    def __init__(self) -> None:
        self.info: dict[str, object] = {}
        self.devices: list[NvbDevice] = []
        self.cases: list[NvbTestCase] = []
        self.warnings: list[str] = []
        self.waived = 0
        self.name: str | None = None
        self.mats: list[_Matrix] = []
        self.cur: _Matrix | None = None
        self.prev_blank_line: str | None = None  # a one-word line before the devices: hostname
        self.failure: ToolFailure | None = None
        self.detail: list[str] = []
        self.last: tuple[int, str] | None = None

    def close_case(self) -> None:
        """Freeze the open testcase, if any."""
        if self.name is not None:
            self.cases.append(NvbTestCase(self.name, tuple(m.build() for m in self.mats)))
        self.name, self.mats, self.cur = None, [], None

    def result(self, text: str) -> NvbandwidthResult:
        """Close the last testcase; ParseError when neither a testcase nor a banner was read."""
        cut = self.name is not None and not self.mats and self.failure is None
        self.close_case()
        launch = self.failure is not None and self.failure.kind is FailureKind.COULD_NOT_START
        if not self.cases and "version" not in self.info and not launch:
            raise not_tool_output(TOOL, "'nvbandwidth Version' or 'Running <test>.'", text)
        failure = self.failure
        if failure is not None and self.detail:
            f = failure
            failure = ToolFailure(f.kind, f.message, f.line, f.code, f.device, tuple(self.detail[:3]))
        if cut and self.last is not None:
            failure = ToolFailure(_CRASH, self.last[1], self.last[0], NO_MATRIX)
        return NvbandwidthResult(
            testcases=tuple(self.cases),
            devices=tuple(self.devices),
            waived=self.waived,
            warnings=tuple(self.warnings),
            failure=failure,
            effective=effective(
                testcases_run=tuple(c.name for c in self.cases),
                testcases_waived=self.waived,
                devices=len(self.devices),
                version=self.info.get("version"),
            ),
            **self.info,  # type: ignore[arg-type]
        )

    def failed(self, no: int, line: str, _m: re.Match[str]) -> bool:
        """A line of :data:`FAILURES` (declined when none matches)."""
        kind = _CRASH if (self.name is not None or self.cases) else FailureKind.INIT_FAILURE
        hit = FAILURES.match(line)
        if hit is not None and hit[0] is FailureKind.COULD_NOT_START:
            kind = hit[0]  # the shell or the loader could not start it
        f = FAILURES.failure(no, line, kind=kind)
        if f is None:
            return False
        if self.failure is None:
            self.failure = f
        else:
            self.detail.append(line)
        return True

    def offset(self, no: int, line: str, _m: re.Match[str]) -> bool:
        """``Current offset ...`` after a failed pattern check: detail of the failure."""
        if self.failure is None:
            return False
        self.detail.append(line)
        return True

    def running(self, no: int, line: str, m: re.Match[str]) -> None:
        self.close_case()
        self.name = line[m.end() :].rstrip(".").strip()

    def waived_line(self, no: int, line: str, _m: re.Match[str]) -> None:
        self.waived += 1

    def total(self, no: int, line: str, _m: re.Match[str]) -> None:
        """``SUM <name> <value>`` / ``COEFFICIENT_OF_VARIATION <name> <value>`` of a matrix."""
        parts = line.split()
        val = to_float(parts[-1]) if len(parts) >= 3 else None
        target = self.cur or (self.mats[-1] if self.mats else None)
        if target is None:
            self.warnings.append(f"line {no}: {parts[0]} outside a matrix")
        elif parts[0] == "SUM":
            target.sum = (parts[1] if len(parts) > 1 else "", val)
        else:
            target.cov = val

    def title(self, no: int, line: str, m: re.Match[str]) -> bool:
        """A matrix title ``... bandwidth (GB/s)`` (declined when it starts with a digit)."""
        if line[0].isdigit() or (self.name is None and "version" not in self.info):
            return False
        if self.name is None:
            self.name = "unnamed"
            self.warnings.append(f"line {no}: matrix without a 'Running' line")
        self.cur = _Matrix(m.group(1), m.group(2))
        self.mats.append(self.cur)
        return True

    def matrix_line(self, no: int, line: str, _m: re.Match[str]) -> bool:
        """The column header or a row of the open matrix (declined outside a matrix)."""
        cur = self.cur
        if cur is None:
            return False
        toks = line.split()
        if cur.cols is None:
            if all(t.isdigit() for t in toks):
                cur.cols = tuple(int(t) for t in toks)
            return True
        if not toks[0].isdigit():
            return True
        vals = tuple(None if t == "N/A" else to_float(t) for t in toks[1:])
        if len(vals) != len(cur.cols):
            raise ParseError(
                TOOL,
                f"matrix row has {len(vals)} cells for {len(cur.cols)} columns",
                line=no,
                expected="one value per column",
            )
        cur.rows.append(int(toks[0]))
        cur.cells.append(vals)
        return True

    def key_value(self, no: int, line: str, _m: re.Match[str]) -> bool:
        """A banner version line or a ``Device N: NAME (BUS)`` line; others are declined."""
        key = line.partition(":")[0].strip()
        if key in _VERSION_KEYS:
            self.info[_VERSION_KEYS[key]] = line.partition(":")[2].strip()
            return True
        dm = _DEVICE_RE.match(line)
        pm = _PROCESS_RE.match(line) if dm is None else None
        if pm is not None:
            self.devices.append(NvbDevice(int(pm.group(2)), pm.group(3), pm.group(4)))
            return True
        if dm is None:
            return False
        self.devices.append(NvbDevice(int(dm.group(1)), dm.group(2), dm.group(3)))
        if self.prev_blank_line and "hostname" not in self.info and " " not in self.prev_blank_line:
            self.info["hostname"] = self.prev_blank_line
        return True

    def other(self, no: int, line: str) -> None:
        """Any other line: remembered when it may be the hostname printed before the devices."""
        if self.name is None and not self.devices and " " not in line and not line.startswith(("NOTE", "Built")):
            self.prev_blank_line = line


#: Every non-blank line, stripped.
_LINES: LineDispatch[_Reader] = LineDispatch(
    [
        (lambda s: FAILURES.match(s) is not None, _Reader.failed),
        ("Current offset", _Reader.offset),
        ("Running ", _Reader.running),
        ("Waived", _Reader.waived_line),
        (("SUM ", "COEFFICIENT_OF_VARIATION "), _Reader.total),
        (_TITLE_RE, _Reader.title),
        (lambda s: s[0].isdigit(), _Reader.matrix_line),
        (re.compile(":"), _Reader.key_value),
    ],
    default=_Reader.other,
)


@guarded(TOOL)
def parse(text: str) -> NvbandwidthResult:
    """Parse nvbandwidth output into an :class:`NvbandwidthResult`.

    nvbandwidth's failures (:data:`FAILURES`) give a record with ``failure`` set.

    Raises:
        ParseError: not nvbandwidth's output (no ``Running`` testcase and no version banner), or a
            matrix row that does not match its column header.
    """
    reader = _Reader()
    for no, line in numbered_lines(text):
        s = line.strip()
        if s:
            _LINES(reader, no, s)
            reader.last = (no, s)
    return reader.result(text)


def detect(text: str) -> bool:
    """True when ``text`` looks like nvbandwidth output."""
    head = text[:20000]
    return "nvbandwidth Version" in head or ("Running " in head and "\nSUM " in head)
