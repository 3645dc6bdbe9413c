"""Parser for STREAM (McCalpin's ``stream.c`` 5.x and its variants, and nvtest's own STREAM kernel).

Reads the ``Function    Best Rate MB/s  Avg time     Min time     Max time`` table (Copy, Scale,
Add, Triad), the banner values (version, array size, NTIMES, OpenMP threads) and the validation
outcome: ``Solution Validates`` or ``Failed Validation on array x[]`` blocks (whose
``AvgRelAbsErr`` value may have been wrapped onto the next line by a mail client). Lines printed
before the banner by modified builds are kept in ``prefix_lines``.

Units: rates in MB/s as printed (10^6 bytes/s) and in GB/s (= MB/s / 1000); times in seconds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from nvtest.parsers._common import (
    LineDispatch,
    ParseError,
    guarded,
    numbered_lines,
    to_float,
    to_int,
)

TOOL = "stream"
DESCRIPTION = "STREAM (stream.c 5.x and variants): Copy/Scale/Add/Triad rates and validation"

__all__ = ["StreamKernel", "StreamResult", "StreamValidationFailure", "detect", "parse"]

KERNELS = ("Copy", "Scale", "Add", "Triad")


@dataclass(frozen=True)
class StreamKernel:
    """One row of the results table."""

    name: str
    best_rate_mbs: float
    avg_time_s: float
    min_time_s: float
    max_time_s: float
    best_rate_gbps: float  # = best_rate_mbs / 1000


@dataclass(frozen=True)
class StreamValidationFailure:
    """A ``Failed Validation on array a[]`` block."""

    array: str
    avg_rel_abs_err: float | None = None
    errors_found: int | None = None


@dataclass(frozen=True)
class StreamResult:
    """A STREAM run. ``validated`` is True (Solution Validates), False (Failed Validation) or None."""

    kernels: tuple[StreamKernel, ...]
    validated: bool | None
    version: str | None = None
    array_size: int | None = None
    ntimes: int | None = None
    bytes_per_element: int | None = None
    threads_requested: int | None = None
    threads_counted: int | None = None
    epsilon: float | None = None
    validation_failures: tuple[StreamValidationFailure, ...] = ()
    prefix_lines: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    def rate_mbs(self, name: str) -> float | None:
        """Best rate of kernel ``name`` (Copy, Scale, Add, Triad) in MB/s, None if absent."""
        return next((k.best_rate_mbs for k in self.kernels if k.name == name), None)

    @property
    def copy_gbps(self) -> float | None:
        """Copy best rate, GB/s."""
        r = self.rate_mbs("Copy")
        return None if r is None else r / 1000.0

    @property
    def triad_gbps(self) -> float | None:
        """Triad best rate, GB/s."""
        r = self.rate_mbs("Triad")
        return None if r is None else r / 1000.0

    @property
    def passed(self) -> bool:
        """True only when all four kernels were read and the run printed ``Solution Validates``."""
        return self.validated is True and len(self.kernels) == 4


_VERSION_RE = re.compile(r"STREAM version \$Revision:\s*([\d.]+)")
_ARRAY_RE = re.compile(r"Array size = (\d+)")
_NTIMES_RE = re.compile(r"executed (\d+) times")
_BYTES_RE = re.compile(r"uses (\d+) bytes per array element")
_THREADS_RE = re.compile(r"Number of Threads (requested|counted)(?: for rank \d+)? = (\d+)")
_FAILED_RE = re.compile(r"Failed Validation on array (\w)\[\](?:.*epsilon \(([^)]+)\))?")
_VALIDATES_RE = re.compile(r"Solution Validates: avg error less than (\S+)")
_ERRORS_RE = re.compile(r"For array (\w)\[\], (\d+) errors were found")
_RELERR_RE = re.compile(r"AvgRelAbsErr:\s*(\S*)")
_ROW_RE = re.compile(r"^(Copy|Scale|Add|Triad):\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)")


_SIZES = ((_ARRAY_RE, "array_size"), (_NTIMES_RE, "ntimes"), (_BYTES_RE, "bytes_per_element"))
_ANY_SIZE_RE = re.compile("|".join(rx.pattern for rx, _ in _SIZES))


class _Reader:
    """What one STREAM run printed; the handlers of :data:`_LINES`.

    ``current`` is the array of the open ``Failed Validation`` block; ``want_relerr`` is set
    when its ``AvgRelAbsErr:`` value was wrapped onto the next line.
    """

    def __init__(self) -> None:
        self.kernels: dict[str, StreamKernel] = {}
        self.failures: dict[str, dict[str, object]] = {}
        self.info: dict[str, object] = {}
        self.prefix: list[str] = []
        self.validated: bool | None = None
        self.banner = False
        self.table_line: int | None = None
        self.want_relerr: str | None = None
        self.current: str | None = None

    def read(self, no: int, line: str) -> None:
        """One non-blank stripped line: a wrapped value, a line before the banner, or
        a line for :data:`_LINES`."""
        if self.want_relerr:
            v = to_float(line)
            if v is not None:
                self.failures[self.want_relerr]["avg_rel_abs_err"] = v
            self.want_relerr = None
            if v is not None:
                return
        if not self.banner and self.before_banner(line):
            return
        _LINES(self, no, line)

    def before_banner(self, line: str) -> bool:
        """True when a line printed before the banner was taken (the version, or a prefix line)."""
        m = _VERSION_RE.search(line)
        if m:
            self.banner = True
            self.info["version"] = m.group(1)
            return True
        if line.startswith("Function") and "Best Rate" in line:
            self.banner = True
        elif not line.startswith("-----"):
            self.prefix.append(line)
            return True
        return False

    def result(self) -> StreamResult:
        """The :class:`StreamResult`; ParseError when no results table was read."""
        if self.table_line is None or not self.kernels:
            raise ParseError(
                TOOL,
                "no STREAM results table",
                expected="'Function    Best Rate MB/s ...' and kernel rows",
            )
        warnings: list[str] = []
        missing = [k for k in KERNELS if k not in self.kernels]
        if missing:
            warnings.append(f"kernel rows missing: {', '.join(missing)}")
        if self.validated is None:
            warnings.append("no validation line (run cut short?)")
        return StreamResult(
            kernels=tuple(self.kernels[k] for k in KERNELS if k in self.kernels),
            validated=self.validated,
            validation_failures=tuple(
                StreamValidationFailure(a, **f)  # type: ignore[arg-type]
                for a, f in self.failures.items()
            ),
            prefix_lines=tuple(self.prefix),
            warnings=tuple(warnings),
            **self.info,  # type: ignore[arg-type]
        )

    def header(self, no: int, line: str, _m: re.Match[str]) -> None:
        if "MB/s" not in line:
            raise ParseError(
                TOOL, "table header without MB/s unit", line=no, expected="'Best Rate MB/s'"
            )
        self.table_line = no

    def kernel(self, no: int, line: str, m: re.Match[str]) -> bool:
        """A ``Triad:`` row of the table (declined before the table header)."""
        if self.table_line is None:
            return False
        vals = [to_float(m.group(i)) for i in range(2, 6)]
        if any(v is None for v in vals):
            raise ParseError(
                TOOL, f"non-numeric {m.group(1)} row", line=no, expected="rate and three times"
            )
        rate, avg, mn, mx = (float(v) for v in vals)  # type: ignore[arg-type]
        self.kernels[m.group(1)] = StreamKernel(m.group(1), rate, avg, mn, mx, rate / 1000.0)
        return True

    def sizes(self, no: int, line: str, _m: re.Match[str]) -> bool:
        """Array size, NTIMES, bytes per element: noted, and the line passed on (False)."""
        for rx, key in _SIZES:
            m = rx.search(line)
            if m:
                self.info[key] = int(m.group(1))
        return False

    def threads(self, no: int, line: str, m: re.Match[str]) -> None:
        self.info["threads_" + m.group(1)] = int(m.group(2))

    def validates(self, no: int, line: str, m: re.Match[str]) -> None:
        self.validated = self.validated if self.validated is False else True
        self.info["epsilon"] = to_float(m.group(1))

    def failed(self, no: int, line: str, m: re.Match[str]) -> None:
        """``Failed Validation on array a[]``: opens that array's failure block."""
        self.validated = False
        self.current = m.group(1)
        self.failures.setdefault(self.current, {})
        if m.group(2):
            self.info["epsilon"] = to_float(m.group(2))

    def relerr(self, no: int, line: str, _m: re.Match[str]) -> bool:
        """``AvgRelAbsErr:`` of the open failure block (declined outside one)."""
        if not self.current:
            return False
        m = _RELERR_RE.search(line)
        v = to_float(m.group(1)) if m and m.group(1) else None
        if v is None:
            self.want_relerr = self.current
        else:
            self.failures[self.current]["avg_rel_abs_err"] = v
        return True

    def errors_found(self, no: int, line: str, m: re.Match[str]) -> None:
        self.failures.setdefault(m.group(1), {})["errors_found"] = to_int(m.group(2))

    def other(self, no: int, line: str) -> None:
        """Any other line: a validation failure worded otherwise, or ignored."""
        if "Failed Validation" in line or ("ERROR" in line.upper() and "validat" in line.lower()):
            self.validated = False


#: The lines after the banner (non-blank, stripped).
_LINES: LineDispatch[_Reader] = LineDispatch(
    [
        ("Function", _Reader.header),
        (_ROW_RE, _Reader.kernel),
        (_ANY_SIZE_RE, _Reader.sizes),
        (_THREADS_RE, _Reader.threads),
        (_VALIDATES_RE, _Reader.validates),
        (_FAILED_RE, _Reader.failed),
        (re.compile("AvgRelAbsErr:"), _Reader.relerr),
        (_ERRORS_RE, _Reader.errors_found),
    ],
    default=_Reader.other,
)


@guarded(TOOL)
def parse(text: str) -> StreamResult:
    """Parse STREAM output into a :class:`StreamResult`.

    Raises:
        ParseError: no ``Function    Best Rate MB/s`` table, or a kernel row that is not numeric.
    """
    reader = _Reader()
    for no, line in numbered_lines(text):
        s = line.strip()
        if s:
            reader.read(no, s)
    return reader.result()


def detect(text: str) -> bool:
    """True when ``text`` holds a STREAM results table: its header and a kernel row (what
    :func:`parse` needs; a table cut short before Triad is still STREAM's)."""
    return "Best Rate MB/s" in text and _DETECT_ROW_RE.search(text) is not None


_DETECT_ROW_RE = re.compile(r"^\s*(?:Copy|Scale|Add|Triad):\s", re.MULTILINE)
