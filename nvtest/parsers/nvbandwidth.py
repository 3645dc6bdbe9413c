"""Parser for nvbandwidth (NVIDIA/nvbandwidth) text output, v0.4 through v0.10.

Reads the version banner (``nvbandwidth Version``, CUDA runtime/driver versions, in the v0.8
``12080`` and v0.10 ``13.3 (13030)`` spellings, driver version), the device lines, and one
:class:`NvbTestCase` per ``Running <testcase>.`` block with its matrices (``memcpy CE
CPU(row) -> GPU(column) bandwidth (GB/s)`` title, column header, rows; ``N/A`` diagonal kept as
None), ``SUM <name> <value>`` and v0.10 ``COEFFICIENT_OF_VARIATION <name> <value>`` lines.
Bidirectional device-to-device testcases print several matrices (Read1, Read2, Total), each
with its own suffixed SUM. ``Waived:`` lines (testcases skipped on this system) are counted.

Units: each matrix carries its unit as printed: ``GB/s`` (bandwidth) or ``ns`` (latency).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from nvtest.parsers._common import LineDispatch, ParseError, guarded, numbered_lines, to_float

TOOL = "nvbandwidth"
DESCRIPTION = (
    "nvbandwidth: per-testcase bandwidth (GB/s) or latency (ns) matrices, SUM and CoV lines"
)

__all__ = ["NvbDevice", "NvbMatrix", "NvbTestCase", "NvbandwidthResult", "detect", "parse"]


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
class NvbandwidthResult:
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

    def testcase(self, name: str) -> NvbTestCase | None:
        """The testcase called ``name``, or None."""
        return next((t for t in self.testcases if t.name == name), None)


_TITLE_RE = re.compile(r"^(.*?)\s*\((GB/s|ns|us|MB/s)\)\s*$")
_DEVICE_RE = re.compile(r"^Device (\d+): (.+?)(?: \(([0-9A-Fa-f:.]+)\))?$")
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

    def close_case(self) -> None:
        """Freeze the open testcase, if any."""
        if self.name is not None:
            self.cases.append(NvbTestCase(self.name, tuple(m.build() for m in self.mats)))
        self.name, self.mats, self.cur = None, [], None

    def result(self) -> NvbandwidthResult:
        """Close the last testcase; ParseError when neither a testcase nor a banner was read."""
        self.close_case()
        if not self.cases and "version" not in self.info:
            raise ParseError(
                TOOL,
                "no nvbandwidth output found",
                expected="'nvbandwidth Version' or 'Running <test>.'",
            )
        return NvbandwidthResult(
            testcases=tuple(self.cases),
            devices=tuple(self.devices),
            waived=self.waived,
            warnings=tuple(self.warnings),
            **self.info,  # type: ignore[arg-type]
        )

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
        if line[0].isdigit():
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
        if dm is None:
            return False
        self.devices.append(NvbDevice(int(dm.group(1)), dm.group(2), dm.group(3)))
        if self.prev_blank_line and "hostname" not in self.info and " " not in self.prev_blank_line:
            self.info["hostname"] = self.prev_blank_line
        return True

    def other(self, no: int, line: str) -> None:
        """Any other line: remembered when it may be the hostname printed before the devices."""
        if (
            self.name is None
            and not self.devices
            and " " not in line
            and not line.startswith(("NOTE", "Built"))
        ):
            self.prev_blank_line = line


#: Every non-blank line, stripped.
_LINES: LineDispatch[_Reader] = LineDispatch(
    [
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

    Raises:
        ParseError: no ``Running`` testcase and no version banner, or a matrix row that does not
            match its column header.
    """
    reader = _Reader()
    for no, line in numbered_lines(text):
        s = line.strip()
        if s:
            _LINES(reader, no, s)
    return reader.result()


def detect(text: str) -> bool:
    """True when ``text`` looks like nvbandwidth output."""
    head = text[:20000]
    return "nvbandwidth Version" in head or ("Running " in head and "\nSUM " in head)
