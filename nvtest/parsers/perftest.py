"""Parser for perftest (``ib_write_bw``, ``ib_read_bw``, ``ib_send_bw`` and the ``_lat`` tests).

Reads the banner (test name, device, link type, GID index, number of QPs, MTU, connection
type, TX depth), the bandwidth table (``#bytes #iterations BW peak[Gb/sec] BW average[Gb/sec]
MsgRate[Mpps]``, or ``[MB/sec]`` without ``--report_gbits``), latency tables (``t_min[usec]`` ...
columns located by name), ``-a`` sweeps, duration mode (``-D``: peak printed as 0.00, which is
not a failure), server and client output in one log (one :class:`PerftestRun` per banner), and
the tool's error lines (connect failures, ``Completion with error``, ``Failed status N``).

Failures (:data:`FAILURES`, perftest 4.x-25.x wordings): no device (``Did not detect devices``,
``IB device mlx5_9 not found``), the peer or the out-of-band exchange never reached
(``Couldn't connect to``, ``Unable to init the socket connection``, ``ethernet_read_keys:
Couldn't read remote address``: ``could_not_start``), a QP or memory region that could not be set
up (``Failed to modify QP ... to RTR``, ``Couldn't allocate MR``: ``init_failure``), a work
completion error mid-run (``Completion with error``, ``Failed status N`` or, since perftest PR
#342 (2025), ``Failed status-<ibv_wc_status_str> (N)``: ``crash_after_partial_output``, status N
as the code). Text with none of perftest's banner,
table, command or failure wordings is not perftest's (ParseError), even if it has error lines.

``effective`` per run: test, side, device, link type, GID index, QPs, MTU, connection type, TX
depth, duration mode, and the message sizes and iteration counts actually in the table; the
log's ``effective`` adds the notices perftest printed about what it changed (``Changing to
active mtu``, ``BW peak won't be measured``).

Units: sizes in bytes; bandwidth as printed (``bw_unit``) and in Gbit/s (``*_gbit_s``; MB/sec
is perftest's MiB-based unit, 1 MB/sec = 2^20 * 8 / 10^9 Gbit/s); latency in microseconds.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from nvtest.parsers._common import (
    FailureKind,
    FailureTable,
    LineDispatch,
    ToolFailure,
    effective,
    effective_field,
    guarded,
    not_tool_output,
    numbered_lines,
    split_kv,
    to_float,
    to_int,
)

TOOL = "perftest"
DESCRIPTION = "perftest ib_*_bw / ib_*_lat: banner, bandwidth or latency rows, connect/completion errors"

__all__ = [
    "FAILURES",
    "PerftestBwRow",
    "PerftestError",
    "PerftestLatRow",
    "PerftestLog",
    "PerftestRun",
    "detect",
    "parse",
]

_MBS_TO_GBIT = 1048576 * 8 / 1e9

_K = FailureKind

#: perftest's failure wordings (linux-rdma/perftest 4.x through 25.x).
#: perftest's own sentences (perftest_parameters.c, the CUDA memory code), passed over on
#: purpose: not a poster's.
OWN_SENTENCES = re.compile(
    r"^(?:Requested mtu is higher than active mtu|Listing all CUDA devices|making it the current"
    r" CUDA Ctx|Picking device No|initializing CUDA|Waiting for client"
    r"|Conflicting CPU frequency values detected|Warning: measured timestamp frequency)"
)

FAILURES = FailureTable(
    [
        (
            re.compile(r"Did not detect devices|Unable to find the Infiniband/RoCE device"),
            _K.NO_DEVICE,
            "perftest: no RDMA device visible",
        ),
        (
            re.compile(r"IB device (?P<device>\S+) not found"),
            _K.NO_DEVICE,
            "perftest: -d names a device that is absent",
        ),
        (
            re.compile(r"Couldn't connect to (?P<device>\S+)"),
            _K.COULD_NOT_START,
            "perftest client: server's TCP port not reached",
        ),
        (
            re.compile(r"Unable to (?:init|open file descriptor for) (?:the )?socket connection"),
            _K.COULD_NOT_START,
            "perftest: out-of-band TCP exchange",
        ),
        (
            re.compile(r"Couldn't listen to port|Problem in resolving basic address and port"),
            _K.COULD_NOT_START,
            "perftest server: port busy or address unresolved",
        ),
        (
            re.compile(
                r"ethernet_read_keys: Couldn't read remote address|Failed to exchange data between server and clients"
            ),
            _K.COULD_NOT_START,
            "perftest: key exchange with the peer failed",
        ),
        (
            re.compile(
                r"Failed to modify QP (?P<code>\S+) to (?:RTR|RTS|INIT)|Unable to Connect the HCA's through the link"
            ),
            _K.INIT_FAILURE,
            "perftest: QP transition refused (GID, MTU, GRH)",
        ),
        (
            re.compile(
                r"Couldn't (?:allocate MR|create (?:QP|CQ|AH)|allocate PD|get context)|Failed to create (?:QP|CQ)"
            ),
            _K.INIT_FAILURE,
            "perftest: verbs resources (memlock, GPU memory)",
        ),
        (
            re.compile(r"Completion with error at (?P<device>client|server)"),
            _K.CRASH_AFTER_PARTIAL_OUTPUT,
            "perftest: work completion error mid-run",
        ),
        (
            re.compile(r"Failed status(?: |-[^(]*\()(?P<code>\d+)"),
            _K.CRASH_AFTER_PARTIAL_OUTPUT,
            "perftest: ibv_wc_status of the failed completion (``Failed status 12:``; since PR #342, "
            "2025, ``Failed status-transport retry counter exceeded (12):``)",
        ),
        (
            re.compile(r"Failed to complete run_iter_\w+ function successfully"),
            _K.CRASH_AFTER_PARTIAL_OUTPUT,
            "perftest: the run loop gave up",
        ),
    ],
    binaries=r"ib_(?:write|read|send|atomic)_(?:bw|lat)|raw_ethernet_\w+",
)
#: perftest's notices about a parameter it changed (kept in the log's ``effective``).
_NOTICES = (
    ("mtu_lowered_to_active", re.compile(r"Changing to active mtu")),
    ("peak_not_measured", re.compile(r"BW peak won't be measured")),
    ("inline_size_set_to_0", re.compile(r"inline size set to 0")),
)
_ANY_NOTICE_RE = re.compile("|".join(rx.pattern for _, rx in _NOTICES))


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
    effective: Mapping[str, object] = effective_field()

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
    failure: ToolFailure | None = None
    effective: Mapping[str, object] = effective_field()

    @property
    def passed(self) -> bool:
        """True when no error line was printed and every run has at least one result row."""
        return (
            bool(self.runs)
            and not self.errors
            and self.failure is None
            and all(r.bw_rows or r.lat_rows for r in self.runs)
        )

    @property
    def failure_reason(self) -> str | None:
        """Why the log is not a pass, from the tool's words; None when it passed."""
        if self.failure is not None:
            return self.failure.reason
        if self.errors:
            return self.errors[0].message
        if not self.passed:
            return "no result row"
        return None

    @property
    def best_bw_avg_gbit_s(self) -> float | None:
        """Highest average bandwidth over all runs, Gbit/s."""
        return max((b for r in self.runs if (b := r.best_bw_avg_gbit_s) is not None), default=None)


_TEST_RE = re.compile(r"^\s*(\S+(?: \S+)*? (?:BW|Latency|Lat) Test)\s*$")
_COMMAND_RE = re.compile(r"\b(ib_(?:write|read|send|atomic)_(?:bw|lat))\b")
_STATUS_RE = re.compile(r"[Ff]ailed status(?: |-[^(]*\()(\d+)")
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
        duration = duration or bool(self.f.pop("duration_mode", False))
        rows: list[PerftestBwRow | PerftestLatRow] = [*self.bw, *self.lat]
        return PerftestRun(
            test=self.test,
            side=self.side,
            duration_mode=duration,
            bw_rows=tuple(self.bw),
            lat_rows=tuple(self.lat),
            warnings=tuple(self.warnings),
            effective=effective(
                test=self.test,
                side=self.side,
                device=self.f.get("device"),
                link_type=self.f.get("link_type"),
                gid_index=self.f.get("gid_index"),
                qps=self.f.get("num_qps"),
                mtu_bytes=self.f.get("mtu_bytes"),
                connection_type=self.f.get("connection_type"),
                tx_depth=self.f.get("tx_depth"),
                duration_mode=duration,
                bw_unit=self.unit if self.bw else None,
                sizes_bytes=tuple(dict.fromkeys(r.size_bytes for r in rows)),
                iterations=tuple(dict.fromkeys(r.iterations for r in rows)),
            ),
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
    run.bw.append(PerftestBwRow(size, iters, peak, avg, run.unit, peak * factor, avg * factor, rate))


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
        self.notices: dict[str, bool] = {}

    def log(self, text: str) -> PerftestLog:
        """Close the open run and return the log; ParseError when nothing of perftest's was
        found (error lines alone count only when they are perftest's wording)."""
        if self.cur is not None:
            self.runs.append(self.cur.build())
        anchored = bool(self.runs) or self.command is not None or any(FAILURES.match(e.message) for e in self.errors)
        errors = self.errors if anchored else []
        if not self.runs and not errors:
            raise not_tool_output(TOOL, "'... BW Test' banner, a table or a perftest error", text)
        return PerftestLog(
            runs=tuple(self.runs),
            errors=tuple(errors),
            command=self.command,
            failure=_failure(errors),
            effective=effective(command=self.command, sides=tuple(r.side or "?" for r in self.runs), **self.notices),
        )

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

    def command_line(self, no: int, line: str, _m: re.Match[str]) -> bool | None:
        """A comment or shell prompt line; the command, when it names a perftest binary.
        Declines a failure line that names the binary (the loader's words)."""
        if FAILURES.match(line):
            return False
        cm = _COMMAND_RE.search(line)
        if cm:
            self.command = self.command or line[cm.start() :]
            self.side_hint = _side(line[cm.end() :].split())
        return None

    def banner_values(self, no: int, line: str, _m: re.Match[str]) -> bool:
        """``Key : value`` pairs of the open run's banner; an error line is passed on."""
        if self.cur is None or line.startswith(("local address", "remote address", "GID:")):
            return False
        if FAILURES.match(line):
            return False
        for key, value in _banner_pairs(line):
            spec = _BANNER_KEYS.get(key)
            if spec:
                name, typ = spec
                self.cur.f[name] = to_int(value.split("[")[0]) if typ is int else value
        return not line.startswith(_ERROR_STARTS)

    def other(self, no: int, line: str) -> None:
        """Any other line: an error line of the tool, a notice of a changed parameter, or
        ignored."""
        for key, rx in _NOTICES if _ANY_NOTICE_RE.search(line) else ():
            if rx.search(line):
                self.notices[key] = True
                if key == "peak_not_measured" and self.cur is not None:
                    self.cur.f["duration_mode"] = True
                return
        if line.startswith(_ERROR_STARTS) or ("error" in line.lower() and self.cur is None) or FAILURES.match(line):
            sm = _STATUS_RE.search(line)
            self.errors.append(PerftestError(no, line, int(sm.group(1)) if sm else None))


def _failure(errors: list[PerftestError]) -> ToolFailure | None:
    """The log's failure: the first error line in perftest's wording (kind from
    :data:`FAILURES`), else the first error line as an ``error_banner``; the status of a
    ``Failed status N`` line as the code of a completion error."""
    if not errors:
        return None
    first = next((e for e in errors if FAILURES.match(e.message)), errors[0])
    f = FAILURES.failure(first.line, first.message) or ToolFailure(FailureKind.ERROR_BANNER, first.message, first.line)
    status = next((e.status for e in errors if e.status is not None), None)
    rest = tuple(e.message for e in errors if e is not first)[:3]
    code = f.code if f.code is not None else (str(status) if status is not None else None)
    return ToolFailure(f.kind, f.message, f.line, code, f.device, rest)


#: perftest options that take no value (every other ``-x`` / ``--xyz`` without ``=`` takes one).
_FLAGS = frozenset(
    "-a -b -F -R -e -h -H -N -O -V -z --report_gbits --report-both --report_both --use_cuda_dmabuf "
    "--run_infinitely --noPeak --cpu_util --dont_xchg_versions --use_hugepages --odp".split()
)


def _side(args: list[str]) -> str:
    """``client`` when the command names a server (a positional argument), else ``server``."""
    expects_value = False
    for arg in args:
        if arg.startswith("-"):
            expects_value = arg not in _FLAGS and "=" not in arg
            continue
        if not expects_value:
            return "client"
        expects_value = False
    return "server"


def _comment_or_prompt(line: str) -> bool:
    """A comment, a shell prompt (``$ ``, ``]# ``, ``sh-5.1# ``, ``root@host:/# ``) or a bare
    perftest command line."""
    if line.startswith("#") or "$ " in line or (line.startswith("[") and "]# " in line):
        return True
    return ("# " in line or line.startswith("ib_")) and _COMMAND_RE.search(line) is not None


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
        ParseError: not perftest's output: no test banner, result table, command line or error
            line in perftest's wording (:data:`FAILURES`).
    """
    reader = _Reader()
    for no, line in numbered_lines(text, strip_prefix=True):
        s = line.strip()
        if s:
            _LINES(reader, no, s)
    return reader.log(text)


def detect(text: str) -> bool:
    """True when ``text`` looks like perftest output."""
    head = text[:8000]
    if "#bytes" in head and "#iterations" in head:
        return True
    if " BW Test" in head or "Latency Test" in head:
        return True
    if _COMMAND_RE.search(head) or ("Completion with error" in head and "scnt=" in head):
        return True
    return any(FAILURES.match(ln) for ln in head.splitlines()[:10])
