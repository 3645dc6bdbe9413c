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

from nvtest.parsers._common import ParseError, guarded, numbered_lines, to_float

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


@guarded(TOOL)
def parse(text: str) -> NvbandwidthResult:
    """Parse nvbandwidth output into an :class:`NvbandwidthResult`.

    Raises:
        ParseError: no ``Running`` testcase and no version banner, or a matrix row that does not
            match its column header.
    """
    info: dict[str, object] = {}
    devices: list[NvbDevice] = []
    cases: list[NvbTestCase] = []
    warnings: list[str] = []
    waived = 0
    name: str | None = None
    mats: list[_Matrix] = []
    cur: _Matrix | None = None
    prev_blank_line: str | None = None

    def close_case() -> None:
        nonlocal name, mats, cur
        if name is not None:
            cases.append(NvbTestCase(name, tuple(m.build() for m in mats)))
        name, mats, cur = None, [], None

    for no, line in numbered_lines(text):
        s = line.strip()
        if not s:
            continue
        if s.startswith("Running "):
            close_case()
            name = s[len("Running ") :].rstrip(".").strip()
            continue
        if s.startswith("Waived"):
            waived += 1
            continue
        if s.startswith(("SUM ", "COEFFICIENT_OF_VARIATION ")):
            parts = s.split()
            val = to_float(parts[-1]) if len(parts) >= 3 else None
            target = cur or (mats[-1] if mats else None)
            if target is None:
                warnings.append(f"line {no}: {parts[0]} outside a matrix")
            elif parts[0] == "SUM":
                target.sum = (parts[1] if len(parts) > 1 else "", val)
            else:
                target.cov = val
            continue
        tm = _TITLE_RE.match(s)
        if tm and not s[0].isdigit():
            if name is None:
                name = "unnamed"
                warnings.append(f"line {no}: matrix without a 'Running' line")
            cur = _Matrix(tm.group(1), tm.group(2))
            mats.append(cur)
            continue
        if cur is not None and s[0].isdigit():
            toks = s.split()
            if cur.cols is None:
                if all(t.isdigit() for t in toks):
                    cur.cols = tuple(int(t) for t in toks)
                continue
            if not toks[0].isdigit():
                continue
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
            continue
        if ":" in s:
            key, _, value = s.partition(":")
            if key.strip() in _VERSION_KEYS:
                info[_VERSION_KEYS[key.strip()]] = value.strip()
                continue
            dm = _DEVICE_RE.match(s)
            if dm:
                devices.append(NvbDevice(int(dm.group(1)), dm.group(2), dm.group(3)))
                if prev_blank_line and "hostname" not in info and " " not in prev_blank_line:
                    info["hostname"] = prev_blank_line
                continue
        if name is None and not devices and " " not in s and not s.startswith(("NOTE", "Built")):
            prev_blank_line = s
    close_case()
    if not cases and "version" not in info:
        raise ParseError(
            TOOL,
            "no nvbandwidth output found",
            expected="'nvbandwidth Version' or 'Running <test>.'",
        )
    return NvbandwidthResult(
        testcases=tuple(cases),
        devices=tuple(devices),
        waived=waived,
        warnings=tuple(warnings),
        **info,  # type: ignore[arg-type]
    )


def detect(text: str) -> bool:
    """True when ``text`` looks like nvbandwidth output."""
    head = text[:20000]
    return "nvbandwidth Version" in head or ("Running " in head and "\nSUM " in head)
