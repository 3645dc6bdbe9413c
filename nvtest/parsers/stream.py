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

from nvtest.parsers._common import ParseError, guarded, numbered_lines, to_float, to_int

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


@guarded(TOOL)
def parse(text: str) -> StreamResult:
    """Parse STREAM output into a :class:`StreamResult`.

    Raises:
        ParseError: no ``Function    Best Rate MB/s`` table, or a kernel row that is not numeric.
    """
    kernels: dict[str, StreamKernel] = {}
    failures: dict[str, dict[str, object]] = {}
    info: dict[str, object] = {}
    prefix: list[str] = []
    warnings: list[str] = []
    validated: bool | None = None
    banner = False
    table_line: int | None = None
    want_relerr: str | None = None
    current: str | None = None
    for no, line in numbered_lines(text):
        s = line.strip()
        if want_relerr and s:
            v = to_float(s)
            if v is not None:
                failures[want_relerr]["avg_rel_abs_err"] = v
            want_relerr = None
            if v is not None:
                continue
        if not banner:
            m = _VERSION_RE.search(s)
            if m:
                banner = True
                info["version"] = m.group(1)
                continue
            if s.startswith("Function") and "Best Rate" in s:
                banner = True
            elif s and not s.startswith("-----"):
                prefix.append(s)
                continue
        if s.startswith("Function"):
            if "MB/s" not in s:
                raise ParseError(
                    TOOL, "table header without MB/s unit", line=no, expected="'Best Rate MB/s'"
                )
            table_line = no
            continue
        m = _ROW_RE.match(s)
        if m and table_line is not None:
            vals = [to_float(m.group(i)) for i in range(2, 6)]
            if any(v is None for v in vals):
                raise ParseError(
                    TOOL, f"non-numeric {m.group(1)} row", line=no, expected="rate and three times"
                )
            rate, avg, mn, mx = (float(v) for v in vals)  # type: ignore[arg-type]
            kernels[m.group(1)] = StreamKernel(m.group(1), rate, avg, mn, mx, rate / 1000.0)
            continue
        for rx, key in (
            (_ARRAY_RE, "array_size"),
            (_NTIMES_RE, "ntimes"),
            (_BYTES_RE, "bytes_per_element"),
        ):
            m = rx.search(s)
            if m:
                info[key] = int(m.group(1))
        m = _THREADS_RE.search(s)
        if m:
            info["threads_" + m.group(1)] = int(m.group(2))
            continue
        m = _VALIDATES_RE.search(s)
        if m:
            validated = validated if validated is False else True
            info["epsilon"] = to_float(m.group(1))
            continue
        m = _FAILED_RE.search(s)
        if m:
            validated = False
            current = m.group(1)
            failures.setdefault(current, {})
            if m.group(2):
                info["epsilon"] = to_float(m.group(2))
            continue
        if "AvgRelAbsErr:" in s and current:
            m = _RELERR_RE.search(s)
            v = to_float(m.group(1)) if m and m.group(1) else None
            if v is None:
                want_relerr = current
            else:
                failures[current]["avg_rel_abs_err"] = v
            continue
        m = _ERRORS_RE.search(s)
        if m:
            failures.setdefault(m.group(1), {})["errors_found"] = to_int(m.group(2))
            continue
        if "Failed Validation" in s or ("ERROR" in s.upper() and "validat" in s.lower()):
            validated = False
    if table_line is None or not kernels:
        raise ParseError(
            TOOL,
            "no STREAM results table",
            expected="'Function    Best Rate MB/s ...' and kernel rows",
        )
    missing = [k for k in KERNELS if k not in kernels]
    if missing:
        warnings.append(f"kernel rows missing: {', '.join(missing)}")
    if validated is None:
        warnings.append("no validation line (run cut short?)")
    return StreamResult(
        kernels=tuple(kernels[k] for k in KERNELS if k in kernels),
        validated=validated,
        validation_failures=tuple(StreamValidationFailure(a, **f) for a, f in failures.items()),  # type: ignore[arg-type]
        prefix_lines=tuple(prefix),
        warnings=tuple(warnings),
        **info,  # type: ignore[arg-type]
    )


def detect(text: str) -> bool:
    """True when ``text`` holds a STREAM results table: its header and a kernel row (what
    :func:`parse` needs; a table cut short before Triad is still STREAM's)."""
    return "Best Rate MB/s" in text and _DETECT_ROW_RE.search(text) is not None


_DETECT_ROW_RE = re.compile(r"^\s*(?:Copy|Scale|Add|Triad):\s", re.MULTILINE)
