"""Parser for perftest (``ib_write_bw``, ``ib_read_bw``, ``ib_send_bw`` and the ``_lat`` tests).

Reads the banner (test name, device, link type, GID index, number of QPs, MTU, connection
type, TX depth), the bandwidth table (``#bytes #iterations BW peak[Gb/sec] BW average[Gb/sec]
MsgRate[Mpps]``, or ``[MB/sec]`` without ``--report_gbits``), latency tables (``t_min[usec]`` ...
columns located by name), ``-a`` sweeps, duration mode (``-D``: peak printed as 0.00, which is
not a failure), server and client output in one log (one :class:`PerftestRun` per banner), and
the tool's error lines (connect failures, ``Completion with error``, ``Failed status N``).

Units: sizes in bytes; bandwidth as printed (``bw_unit``) and in Gbit/s (``*_gbit_s``; MB/sec
is perftest's MiB-based unit, 1 MB/sec = 2^20 * 8 / 10^9 Gbit/s); latency in microseconds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from nvtest.parsers._common import (
    LineDispatch,
    ParseError,
    guarded,
    numbered_lines,
    split_kv,
    to_float,
    to_int,
)

TOOL = "perftest"
DESCRIPTION = (
    "perftest ib_*_bw / ib_*_lat: banner, bandwidth or latency rows, connect/completion errors"
)

__all__ = [
    "PerftestBwRow",
    "PerftestError",
    "PerftestLatRow",
    "PerftestLog",
    "PerftestRun",
    "detect",
    "parse",
]

_MBS_TO_GBIT = 1048576 * 8 / 1e9


@dataclass(frozen=True)
class PerftestBwRow:
    """One bandwidth row. ``bw_peak``/``bw_avg`` are in ``bw_unit``; ``*_gbit_s`` converted."""

    size_bytes: int
    iterations: int
    bw_peak: float
    bw_avg: float
    bw_unit: str
    bw_peak_gbit_s: float
    bw_avg_gbit_s: float
    msg_rate_mpps: float | None


@dataclass(frozen=True)
class PerftestLatRow:
    """One latency row, microseconds; columns the build did not print are None."""

    size_bytes: int
    iterations: int
    t_min_us: float | None
    t_max_us: float | None
    t_typical_us: float | None
    t_avg_us: float | None = None
    t_stdev_us: float | None = None
    p99_us: float | None = None
    p999_us: float | None = None


@dataclass(frozen=True)
class PerftestError:
    """An error line of the tool, with the work-completion status code when printed."""

    line: int
    message: str
    status: int | None = None


@dataclass(frozen=True)
class PerftestRun:
    """One banner and its table (one side of a test)."""

    test: str
    side: str | None = None
    device: str | None = None
    link_type: str | None = None
    gid_index: int | None = None
    num_qps: int | None = None
    mtu_bytes: int | None = None
    connection_type: str | None = None
    transport_type: str | None = None
    tx_depth: int | None = None
    duration_mode: bool = False
    bw_rows: tuple[PerftestBwRow, ...] = ()
    lat_rows: tuple[PerftestLatRow, ...] = ()
    warnings: tuple[str, ...] = ()

    @property
    def best_bw_avg_gbit_s(self) -> float | None:
        """Highest average bandwidth of any row, Gbit/s."""
        return max((r.bw_avg_gbit_s for r in self.bw_rows), default=None)


@dataclass(frozen=True)
class PerftestLog:
    """Everything in one log: the runs (server and/or client) and the error lines."""

    runs: tuple[PerftestRun, ...]
    errors: tuple[PerftestError, ...] = ()
    command: str | None = None
    warnings: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        """True when no error line was printed and every run has at least one result row."""
        return (
            bool(self.runs) and not self.errors and all(r.bw_rows or r.lat_rows for r in self.runs)
        )

    @property
    def best_bw_avg_gbit_s(self) -> float | None:
        """Highest average bandwidth over all runs, Gbit/s."""
        return max((b for r in self.runs if (b := r.best_bw_avg_gbit_s) is not None), default=None)


_TEST_RE = re.compile(r"^\s*(\S+(?: \S+)*? (?:BW|Latency|Lat) Test)\s*$")
_COMMAND_RE = re.compile(r"\b(ib_(?:write|read|send|atomic)_(?:bw|lat))\b")
_STATUS_RE = re.compile(r"[Ff]ailed status (\d+)")
_ERROR_STARTS = (
    "Couldn't",
    "Could not",
    "Unable",
    "Failed",
    "Completion with error",
    "Error",
    "ERROR",
    "Problem",
    "scnt=",
    " Failed",
)
_BANNER_KEYS: dict[str, tuple[str, type]] = {
    "Device": ("device", str),
    "Link type": ("link_type", str),
    "GID index": ("gid_index", int),
    "Number of qps": ("num_qps", int),
    "Mtu": ("mtu_bytes", int),
    "Connection type": ("connection_type", str),
    "Transport type": ("transport_type", str),
    "TX depth": ("tx_depth", int),
}
_LAT_COLS = {
    "t_min": "t_min_us",
    "t_max": "t_max_us",
    "t_typical": "t_typical_us",
    "t_avg": "t_avg_us",
    "t_stdev": "t_stdev_us",
    "99%": "p99_us",
    "99.9%": "p999_us",
}


def _banner_pairs(line: str) -> list[tuple[str, str]]:
    """Split a banner line that may hold two ``key : value`` pairs separated by spaces or tabs."""
    parts = re.split(r"\t+| {3,}(?=[A-Z])", line.strip())
    pairs = []
    for part in parts:
        kv = split_kv(part)
        if kv:
            pairs.append(kv)
    return pairs


class _Run:
    def __init__(self, test: str, side: str | None) -> None:
        self.test = test
        self.side = side
        self.f: dict[str, object] = {}
        self.bw: list[PerftestBwRow] = []
        self.lat: list[PerftestLatRow] = []
        self.warnings: list[str] = []
        self.header: list[str] | None = None
        self.unit = "Gb/sec"

    def build(self) -> PerftestRun:
        duration = bool(self.bw) and all(r.bw_peak == 0.0 and r.bw_avg > 0 for r in self.bw)
        return PerftestRun(
            test=self.test,
            side=self.side,
            duration_mode=duration or bool(self.f.pop("duration_mode", False)),
            bw_rows=tuple(self.bw),
            lat_rows=tuple(self.lat),
            warnings=tuple(self.warnings),
            **self.f,  # type: ignore[arg-type]
        )


def _lat_header(line: str) -> list[str]:
    cols = []
    for tok in re.findall(r"#bytes|#iterations|t_\w+|99\.9%|99%", line):
        cols.append(tok)
    return cols


def _bw_row(run: _Run, no: int, tokens: list[str]) -> None:
    if len(tokens) < 4:
        run.warnings.append(f"line {no}: short bandwidth row")
        return
    size, iters = to_int(tokens[0]), to_int(tokens[1])
    peak, avg = to_float(tokens[2]), to_float(tokens[3])
    rate = to_float(tokens[4]) if len(tokens) > 4 else None
    if size is None or iters is None or peak is None or avg is None:
        run.warnings.append(f"line {no}: unreadable bandwidth row")
        return
    factor = 1.0 if run.unit.startswith("Gb") else _MBS_TO_GBIT
    run.bw.append(
        PerftestBwRow(size, iters, peak, avg, run.unit, peak * factor, avg * factor, rate)
    )


def _lat_row(run: _Run, no: int, tokens: list[str]) -> None:
    header = run.header or []
    size, iters = to_int(tokens[0]), to_int(tokens[1]) if len(tokens) > 1 else None
    if size is None or iters is None or len(tokens) > len(header):
        run.warnings.append(f"line {no}: unreadable latency row")
        return
    vals: dict[str, float | None] = {}
    for name, tok in zip(header[2:], tokens[2:], strict=False):
        key = _LAT_COLS.get(name)
        if key:
            vals[key] = to_float(tok)
    run.lat.append(
        PerftestLatRow(
            size,
            iters,
            vals.pop("t_min_us", None),
            vals.pop("t_max_us", None),
            vals.pop("t_typical_us", None),
            **vals,
        )
    )


class _Reader:
    """State of one log: finished runs, the open run, error lines, and the hints (a server
    waiting for its client, the command line's arguments) that say which side a run is.
    Its methods are the handlers of :data:`_LINES`."""

    def __init__(self) -> None:
        self.runs: list[PerftestRun] = []
        self.errors: list[PerftestError] = []
        self.cur: _Run | None = None
        self.command: str | None = None
        self.waiting = False
        self.side_hint: str | None = None

    def log(self) -> PerftestLog:
        """Close the open run and return the log; ParseError when nothing was found."""
        if self.cur is not None:
            self.runs.append(self.cur.build())
        if not self.runs and not self.errors:
            raise ParseError(
                TOOL, "no perftest banner, table or error line", expected="'... BW Test' banner"
            )
        return PerftestLog(runs=tuple(self.runs), errors=tuple(self.errors), command=self.command)

    def wait(self, no: int, line: str, _m: re.Match[str]) -> None:
        self.waiting = True

    def banner(self, no: int, line: str, m: re.Match[str]) -> bool:
        """``RDMA_Write BW Test``: a new run (declines a ``#`` line)."""
        if line.startswith("#"):
            return False
        if self.cur is not None:
            self.runs.append(self.cur.build())
        self.cur = _Run(m.group(1), "server" if self.waiting else self.side_hint)
        self.waiting = False
        return True

    def header(self, no: int, line: str, _m: re.Match[str]) -> None:
        if self.cur is None:
            self.cur = _Run("unknown", self.side_hint)
        if "BW" in line:
            unit = re.search(r"BW average\[([^\]]+)\]", line)
            self.cur.unit = unit.group(1) if unit else "MB/sec"
            self.cur.header = ["bw"]
        else:
            self.cur.header = _lat_header(line)

    def row(self, no: int, line: str, _m: re.Match[str]) -> bool:
        """A table row (declined before any table header)."""
        if self.cur is None or not self.cur.header:
            return False
        if self.cur.header == ["bw"]:
            _bw_row(self.cur, no, line.split())
        else:
            _lat_row(self.cur, no, line.split())
        return True

    def command_line(self, no: int, line: str, _m: re.Match[str]) -> None:
        """A comment or shell prompt line; the command, when it names a perftest binary."""
        cm = _COMMAND_RE.search(line)
        if cm:
            self.command = self.command or line[cm.start() :]
            args = line[cm.end() :].split()
            self.side_hint = (
                "client"
                if args and not args[-1].startswith("-") and not args[-1].isdigit()
                else "server"
            )

    def banner_values(self, no: int, line: str, _m: re.Match[str]) -> bool:
        """``Key : value`` pairs of the open run's banner; an error line is passed on."""
        if self.cur is None or line.startswith(("local address", "remote address", "GID:")):
            return False
        for key, value in _banner_pairs(line):
            spec = _BANNER_KEYS.get(key)
            if spec:
                name, typ = spec
                self.cur.f[name] = to_int(value.split("[")[0]) if typ is int else value
        return not line.startswith(_ERROR_STARTS)

    def other(self, no: int, line: str) -> None:
        """Any other line: an error line of the tool, or ignored."""
        if line.startswith(_ERROR_STARTS) or ("error" in line.lower() and self.cur is None):
            sm = _STATUS_RE.search(line)
            self.errors.append(PerftestError(no, line, int(sm.group(1)) if sm else None))


def _comment_or_prompt(line: str) -> bool:
    return line.startswith("#") or "$ " in line or (line.startswith("[") and "]# " in line)


#: Every non-blank line, launcher tag removed, stripped.
_LINES: LineDispatch[_Reader] = LineDispatch(
    [
        (re.compile("Waiting for client"), _Reader.wait),
        (_TEST_RE, _Reader.banner),
        ("#bytes", _Reader.header),
        (lambda s: s[0].isdigit(), _Reader.row),
        (_comment_or_prompt, _Reader.command_line),
        (re.compile(":"), _Reader.banner_values),
    ],
    default=_Reader.other,
)


@guarded(TOOL)
def parse(text: str) -> PerftestLog:
    """Parse perftest output into a :class:`PerftestLog`.

    Raises:
        ParseError: neither a test banner, a result table nor an error line was found.
    """
    reader = _Reader()
    for no, line in numbered_lines(text, strip_prefix=True):
        s = line.strip()
        if s:
            _LINES(reader, no, s)
    return reader.log()


def detect(text: str) -> bool:
    """True when ``text`` looks like perftest output."""
    head = text[:8000]
    if "#bytes" in head and "#iterations" in head:
        return True
    if " BW Test" in head or "Latency Test" in head:
        return True
    return bool(_COMMAND_RE.search(head)) or ("Completion with error" in head and "scnt=" in head)
