"""Parser for STREAM (McCalpin's ``stream.c`` 5.x and its variants, and nvtest's own STREAM kernel).

Reads the ``Function    Best Rate MB/s  Avg time     Min time     Max time`` table (Copy, Scale,
Add, Triad), the banner values (version, array size, NTIMES, OpenMP threads) and the validation
outcome: ``Solution Validates`` or ``Failed Validation on array x[]`` blocks (whose
``AvgRelAbsErr`` value may have been wrapped onto the next line by a mail client). Lines printed
before the banner by modified builds are kept in ``prefix_lines``.

A failed validation is a result (``validated`` False, ``passed`` False), not a failure of the
tool. Failures (:data:`FAILURES`): a kernel that could not allocate its arrays
(``init_failure``); a run that printed its banner but no table, or a table cut before its
validation line, or a crash line after the banner (``Segmentation fault``, ``Killed``):
``crash_after_partial_output``. Text without STREAM's banner or table is not STREAM's
(ParseError). ``effective``: array size, NTIMES, bytes per element, threads requested and
counted, and the kernels present in the table.

Units: rates in MB/s as printed (10^6 bytes/s) and in GB/s (= MB/s / 1000); times in seconds.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from nvtest.parsers._common import (
    FailureKind,
    FailureTable,
    LineDispatch,
    ParseError,
    ToolFailure,
    effective,
    effective_field,
    guarded,
    not_tool_output,
    numbered_lines,
    to_float,
    to_int,
)

TOOL = "stream"
DESCRIPTION = "STREAM (stream.c 5.x and variants): Copy/Scale/Add/Triad rates and validation"

__all__ = ["FAILURES", "StreamKernel", "StreamResult", "StreamValidationFailure", "detect", "parse"]

KERNELS = ("Copy", "Scale", "Add", "Triad")

#: STREAM's failure wordings: nvtest's kernel (nvtest/probes/stream.c) and the shell's words for a
#: process that died after STREAM printed its banner (only read once a STREAM banner was seen).
#: STREAM's own banner sentences (stream.c 5.10), passed over on purpose: not a poster's.
OWN_SENTENCES = re.compile(
    r"^(?:Each test below will take|For best results|Increase the size of the arrays"
    r"|The \*best\* time|WARNING -- The above|Your clock granularity|will be used to compute"
    r"|you are not getting at least|precision of your system timer|This system uses"
    r"|Each kernel will be executed)"
)

FAILURES = FailureTable(
    [
        (
            re.compile(r"cannot allocate \d+ arrays of \d+ doubles"),
            FailureKind.INIT_FAILURE,
            "nvtest STREAM kernel",
        ),
        (
            re.compile(r"(?P<code>Segmentation fault|Bus error|Killed|Aborted)(?: \(core dumped\))?\s*$"),
            FailureKind.CRASH_AFTER_PARTIAL_OUTPUT,
            "the shell, after stream.c printed its banner",
        ),
    ],
    binaries=r"stream[\w.]*",
)
#: :attr:`ToolFailure.code` of a run that stopped before its validation line / its table.
NO_VALIDATION = "no validation line"
NO_TABLE = "no results table"


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
    failure: ToolFailure | None = None
    effective: Mapping[str, object] = effective_field()

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
        return self.validated is True and len(self.kernels) == 4 and self.failure is None

    @property
    def failure_reason(self) -> str | None:
        """Why the run is not a pass; None when it passed."""
        if self.failure is not None and self.failure.code not in (NO_VALIDATION,):
            return self.failure.reason
        if self.validated is False:
            return "failed validation on " + ", ".join(f"{v.array}[]" for v in self.validation_failures)
        if not self.passed:
            return "no 'Solution Validates' line (run cut short?)"
        return None


_VERSION_RE = re.compile(r"STREAM version \$Revision:\s*([\d.]+)")
_ARRAY_RE = re.compile(r"Array size = (\d+)")
_NTIMES_RE = re.compile(r"executed (\d+) times")
_BYTES_RE = re.compile(r"uses (\d+) bytes per array element")
_THREADS_RE = re.compile(r"Number of Threads (requested|counted)(?: for rank \d+)? = (\d+)")
_FAILED_RE = re.compile(r"Failed Validation on array (\w)\[\](?:.*epsilon \(([^)]+)\))?")
_VALIDATES_RE = re.compile(r"Solution Validates: avg (?:and max )?error less than (\S+)")
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
        self.failure: ToolFailure | None = None
        self.last: tuple[int, str] | None = None

    def read(self, no: int, line: str) -> None:
        """One non-blank stripped line: a wrapped value, a failure line, a line before the
        banner, or a line for :data:`_LINES`."""
        self.last = (no, line)
        hit = FAILURES.match(line)
        if hit is not None and (self.banner or hit[0] in (FailureKind.INIT_FAILURE, FailureKind.COULD_NOT_START)):
            self.failure = self.failure or FAILURES.failure(no, line)
            return
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
        if line.startswith("nvtest STREAM-style kernel"):
            self.banner = True
            return True
        if line.startswith("Function") and "Best Rate" in line:
            self.banner = True
        elif not line.startswith("-----"):
            self.prefix.append(line)
            return True
        return False

    def result(self, text: str) -> StreamResult:
        """The :class:`StreamResult`; ParseError when neither STREAM's banner nor its table (nor
        nvtest's kernel's failure) was read."""
        if not self.kernels and not self.banner and self.failure is None:
            raise not_tool_output(TOOL, "'Function    Best Rate MB/s ...' and kernel rows", text)
        warnings: list[str] = []
        missing = [k for k in KERNELS if k not in self.kernels]
        if missing and self.kernels:
            warnings.append(f"kernel rows missing: {', '.join(missing)}")
        if self.validated is None and self.kernels:
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
            failure=self.final_failure(),
            effective=effective(
                version=self.info.get("version"),
                array_size=self.info.get("array_size"),
                ntimes=self.info.get("ntimes"),
                bytes_per_element=self.info.get("bytes_per_element"),
                threads_requested=self.info.get("threads_requested"),
                threads_counted=self.info.get("threads_counted"),
                kernels=tuple(k for k in KERNELS if k in self.kernels),
            ),
            **self.info,  # type: ignore[arg-type]
        )

    def final_failure(self) -> ToolFailure | None:
        """The failure line read, else a run cut before its table or its validation line."""
        if self.failure is not None:
            return self.failure
        no, line = self.last or (None, "")
        if self.table_line is None or not self.kernels:
            return ToolFailure(FailureKind.CRASH_AFTER_PARTIAL_OUTPUT, line, no, NO_TABLE)
        if self.validated is None:
            return ToolFailure(FailureKind.CRASH_AFTER_PARTIAL_OUTPUT, line, no, NO_VALIDATION)
        return None

    def header(self, no: int, line: str, _m: re.Match[str]) -> None:
        if "MB/s" not in line:
            raise ParseError(TOOL, "table header without MB/s unit", line=no, expected="'Best Rate MB/s'")
        self.table_line = no

    def kernel(self, no: int, line: str, m: re.Match[str]) -> bool:
        """A ``Triad:`` row of the table (declined before the table header)."""
        if self.table_line is None:
            return False
        vals = [to_float(m.group(i)) for i in range(2, 6)]
        if any(v is None for v in vals):
            raise ParseError(TOOL, f"non-numeric {m.group(1)} row", line=no, expected="rate and three times")
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
        ParseError: not STREAM's output (no banner, no ``Function    Best Rate MB/s`` table), or a
            kernel row that is not numeric.
    """
    reader = _Reader()
    for no, line in numbered_lines(text):
        s = line.strip()
        if s:
            reader.read(no, s)
    return reader.result(text)


def detect(text: str) -> bool:
    """True when ``text`` holds a STREAM results table: its header and a kernel row (what
    :func:`parse` needs; a table cut short before Triad is still STREAM's)."""
    return "Best Rate MB/s" in text and _DETECT_ROW_RE.search(text) is not None


_DETECT_ROW_RE = re.compile(r"^\s*(?:Copy|Scale|Add|Triad):\s", re.MULTILINE)
