"""Parser for nccl-tests (``all_reduce_perf``, ``all_gather_perf``, ``alltoall_perf``... every ``*_perf``).

Reads the text every nccl-tests release prints, from the NCCL 1.0-era layout (parameter line
without ``#``, ``bytes N type op ... res`` header) through the ``error`` float column (~2019) to
the current ``#wrong`` integer column and the 2.19 ``# nccl-tests version`` line. Columns are
located by header name, never by position. Open MPI ``[1,0]<stdout>:`` tags and srun labels are
stripped; NCCL INFO/WARN lines inside the table are kept aside; several tests concatenated in one
log (``Running: ...`` lines, ``# Collective test starting:`` banners, or a new parameter line)
give one :class:`NcclTestRun` each.

Failures (:data:`FAILURES`): a ``Test NCCL|CUDA failure common.cu:N '...'`` line is the tool's
own verdict on why it died: ``init_failure`` before the results table, ``crash_after_partial_output``
once the table header (or a row) was printed, ``plugin_not_loaded`` when NCCL warned that the
network plugin it was told to use is not there. A launcher's words (Open MPI, srun, UCX) stand in
when nccl-tests printed none: ``could_not_start`` when no nccl-tests line came out at all. A table
that stops before its summary is ``crash_after_partial_output`` (code ``no summary``) with the
last line printed. Wrong results (``#wrong``, ``Out of bounds values : N FAILED``) are results,
not a failure of the tool: ``failure`` stays None and ``passed`` is False.

Versions: the 2.17+ banner ``# nccl-tests version 2.18.3 nccl-headers=23004 nccl-library=23004``
names the NCCL the binary ran with (``23004`` -> ``2.30.4``, used when no ``NCCL version`` line
was printed); the 2.18/2.19 columns are located by the header: a ``timestamp`` last (``-S 1``,
two tokens per row), ``i_min i_max i_p99 i_cv%`` after each half (``-I 1``, not kept), and
``cputime`` for ``time`` (``-C 1``); ``# Reducing maxBytes to N due to memory limitation`` is kept as
``reduced_max_bytes``. With ``-d all`` (and ``-o all``) one table holds one block of sizes per data
type (and op): :attr:`NcclTestRun.blocks` gives each block's rows and its own average busbw,
since nccl-tests prints only the average over all of them. The `` .. host pid N: Test failure
common.cu:N`` lines nccl-tests prints after a complete summary when results were wrong are its
exit, not a crash: they go to ``warnings`` and the wrong results decide.

``effective`` holds what the parameter line and the table say ran: minBytes/maxBytes, step,
warmup/iters/agg iters, validation (``-c``), graph, threads and GPUs per thread, ranks and hosts
listed, and the sizes, data types and reduction ops actually present in the table.

Units: sizes in bytes, times in microseconds, bandwidths in GB/s (10^9 bytes/s) as printed.
"""

from __future__ import annotations

import functools
import re
import types
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
    to_float,
    to_int,
)
from nvtest.parsers.launcher_words import MPIRUN_RANK_DIED, MPIRUN_RANK_NONZERO, SRUN_TASK_DIED

TOOL = "nccl-tests"
DESCRIPTION = "nccl-tests *_perf output: per-size algbw/busbw, #wrong, avg busbw, failures (one record per test)"

__all__ = [
    "FAILURES",
    "NcclBlock",
    "NcclLine",
    "NcclLog",
    "NcclPath",
    "NcclRank",
    "NcclResult",
    "NcclRow",
    "NcclFailure",
    "NcclTestRun",
    "detect",
    "parse",
]


@dataclass(frozen=True)
class NcclRank:
    """One ``#  Rank  N Group G Pid P on HOST device D [BUS] NAME`` line (Group/Pid optional)."""

    rank: int
    host: str
    device: int
    bus_id: str
    gpu_name: str
    pid: int | None = None
    group: int | None = None


@dataclass(frozen=True)
class NcclResult:
    """One half (out-of-place or in-place) of a size row.

    ``wrong`` is the integer ``#wrong`` count; ``max_error`` the legacy float ``error``/``res``
    column; both None when the cell is ``N/A`` (not validated).
    """

    time_us: float
    algbw_gbps: float
    busbw_gbps: float
    wrong: int | None = None
    max_error: float | None = None

    @property
    def validated(self) -> bool:
        """False when the tool printed ``N/A`` for the check of this half."""
        return self.wrong is not None or self.max_error is not None


@dataclass(frozen=True)
class NcclRow:
    """One size row of the results table."""

    line: int
    size_bytes: int
    count: int
    dtype: str
    redop: str | None
    root: int | None
    out_of_place: NcclResult
    in_place: NcclResult | None

    @property
    def wrong(self) -> int:
        """Sum of the ``#wrong`` counts of both halves (N/A counts 0)."""
        return (self.out_of_place.wrong or 0) + ((self.in_place.wrong or 0) if self.in_place else 0)

    @property
    def busbw_gbps(self) -> float:
        """The better busbw of the two halves, GB/s."""
        ip = self.in_place.busbw_gbps if self.in_place else 0.0
        return max(self.out_of_place.busbw_gbps, ip)


@dataclass(frozen=True)
class NcclBlock:
    """The consecutive rows of one data type, op and root (``-d all`` / ``-o all`` print one
    block per type and op in the same table).

    ``avg_busbw_gbps`` is this block's mean of all out-of-place and in-place busbw values (how
    nccl-tests computes its overall ``Avg bus bandwidth``), GB/s; None without rows.
    """

    dtype: str
    redop: str | None
    root: int | None
    rows: tuple[NcclRow, ...]

    @property
    def avg_busbw_gbps(self) -> float | None:
        """Mean busbw of the block's oop and ip halves, GB/s."""
        vals = [h.busbw_gbps for r in self.rows for h in (r.out_of_place, r.in_place) if h]
        return sum(vals) / len(vals) if vals else None

    @property
    def wrong(self) -> int:
        """Sum of ``#wrong`` over the block's rows."""
        return sum(r.wrong for r in self.rows)


@dataclass(frozen=True)
class NcclFailure:
    """A ``Test NCCL failure common.cu:959 'internal error'`` style line: where and why the test died."""

    line: int
    kind: str
    site: str
    message: str
    host: str | None = None


@dataclass(frozen=True)
class NcclLine:
    """One NCCL INFO line as printed (launcher tags removed) and its 1-based line number."""

    line: int
    text: str


@dataclass(frozen=True)
class NcclPath:
    """The path NCCL says it took (its ``NCCL_DEBUG=INFO`` lines, NCCL 2.4 to 2.2x).

    Attributes:
        networks: ``Using network <name>`` lines (``IB``, ``Socket``, a plugin's name), one per
            rank that printed it, in order.
        no_ib_device: the ``NET/IB : No device found.`` line, when printed (IB verbs saw no HCA).
        hcas: the HCAs of ``NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE ...`` as
            ``(device:port, link)``, link ``IB`` or ``RoCE``, first-seen order.
        hca_lines: the ``NET/IB : Using [...]`` lines.
        gdr: per HCA name (``mlx5_0``), the first ``GPU Direct RDMA Enabled|Disabled for HCA N
            'mlx5_0'`` line and whether it said Enabled; a ``Disabled`` line for an HCA wins
            over an ``Enabled`` one (one rank without GDR is a path without GDR).
        channels: the transport of each ``Channel NN ... via <transport>`` line, counted
            (``NET/IB/0/GDRDMA``, ``NET/Socket/0``, ``P2P/IPC``, ``SHM``...).
        channel_lines: per channel transport, its first ``Channel`` line, keyed ``[send]
            NET/IB/0`` (the direction NCCL printed, when it did, then the transport).
        info_lines: how many ``NCCL INFO`` lines were printed (0: the log was not taken at
            ``NCCL_DEBUG=INFO``, and nothing of the path can be read).
        nvls: NVLink SHARP (NVSwitch multicast) per device, from ``NVLS multicast support is
            [not ]available on dev N`` (NCCL 2.17+, printed at init when more than two GPUs
            share the NVLink domain and ``NCCL_NVLS_ENABLE`` is not 0), keyed ``host dev N``
            (``dev N`` where the line carries no host); a ``not available`` line wins.
        nvls_channels: the ``N nvls channels`` count of ``N coll channels, [N collnet channels,]
            N nvls channels, ...`` (the smallest any rank printed) and its line.
        nvls_setup: the first line saying NVLS buffers were set up or connected (``NVLS comm
            0x... headRank``, ``Connected NVLS tree``): NVLS is in use.
        nvls_failures: ``NCCL WARN`` lines of the NVLS transport: ``Failed to bind NVLink SHARP
            (NVLS) Multicast memory ... CUDA error 401``, a CUDA failure at ``transport/nvls.cc``.
        collnet_plugin: ``NET/Plugin: Loaded collnet plugin SHARP (v8)`` (the IB SHARP plugin).
        collnet: lines saying CollNet was connected (``Collnet Chains``, ``Connected Collnet
            Chains``, ``CollNet ... connected``, channels ``via COLLNET``).
        algorithms: the algorithm of each ``AllReduce: N Bytes -> Algo NVLS proto SIMPLE
            channel{Lo..Hi}={0..15}`` tuning line (NCCL 2.19+ with ``NCCL_DEBUG_SUBSYS`` holding
            TUNING; rank 0 only), counted, upper case (``RING``, ``TREE``, ``NVLS``, ``NVLSTREE``,
            ``COLLNETDIRECT``...).
    """

    networks: tuple[NcclLine, ...] = ()
    no_ib_device: NcclLine | None = None
    hcas: tuple[tuple[str, str], ...] = ()
    hca_lines: tuple[NcclLine, ...] = ()
    gdr: Mapping[str, tuple[bool, NcclLine]] = effective_field()
    channels: Mapping[str, int] = effective_field()
    channel_lines: Mapping[str, NcclLine] = effective_field()
    info_lines: int = 0
    nvls: Mapping[str, tuple[bool, NcclLine]] = effective_field()
    nvls_channels: tuple[int, NcclLine] | None = None
    nvls_setup: NcclLine | None = None
    nvls_failures: tuple[NcclLine, ...] = ()
    collnet_plugin: NcclLine | None = None
    collnet: tuple[NcclLine, ...] = ()
    algorithms: Mapping[str, int] = effective_field()

    @property
    def nvls_unavailable(self) -> tuple[tuple[str, NcclLine], ...]:
        """Devices NCCL said NVLS multicast is not available on, with its line."""
        return tuple((d, ln) for d, (on, ln) in self.nvls.items() if not on)

    @property
    def nvls_used(self) -> bool | None:
        """True when NCCL set NVLS up (buffers, a tree, or nvls channels > 0 on every device
        that said available); False when it said unavailable, failed, or gave 0 nvls channels;
        None when it printed no NVLS line (NCCL < 2.17, two GPUs or fewer, NVLS switched off)."""
        if self.nvls_failures or self.nvls_unavailable:
            return False
        if self.nvls_setup is not None or (self.nvls_channels and self.nvls_channels[0] > 0):
            return True
        if any(a.startswith("NVLS") for a in self.algorithms):
            return True
        return False if self.nvls_channels is not None else None

    @property
    def net_transport(self) -> str | None:
        """``IB``, ``RoCE`` or ``Socket`` (or a plugin's network name): what NCCL used between
        nodes. From ``Using network X`` (``IB`` becomes ``RoCE`` when every HCA it listed is
        RoCE; ``Socket`` when any rank said Socket), else (NCCL < 2.12 prints no such line)
        from the channel lines ``via NET/<name>``; None when NCCL said neither."""
        names = [n.text.rsplit("Using network", 1)[1].strip() for n in self.networks]
        if not names:
            names = [k.split("/")[1] for k in self.channels if k.startswith("NET/")]
        if not names:
            return None
        if "Socket" in names:
            return "Socket"
        name = names[0]
        if name == "IB" and self.hcas and all(link == "RoCE" for _, link in self.hcas):
            return "RoCE"
        return name

    @property
    def socket_line(self) -> NcclLine | None:
        """The first ``Using network Socket`` line, or None."""
        return next((n for n in self.networks if n.text.rstrip().endswith("Socket")), None)

    @property
    def net_without_gdrdma(self) -> NcclLine | None:
        """A channel line over the RDMA network that does not say ``/GDRDMA`` (``via
        NET/IB/0``: that channel's traffic is staged through host memory), or None: the first
        receive channel without it, else the first channel where no RDMA channel says it.

        A send channel alone without ``/GDRDMA`` beside receive channels with it is NCCL's
        default where GPUs have no NVLink (GPUDirect RDMA reads off, ``NCCL_NET_GDR_READ``)."""
        net = {k: ln for k, ln in self.channel_lines.items() if "NET/IB/" in k}
        staged = {k: ln for k, ln in net.items() if "GDRDMA" not in k}
        recv = [ln for k, ln in staged.items() if k.startswith("[receive]")]
        if recv:
            return recv[0]
        return next(iter(staged.values()), None) if len(staged) == len(net) else None

    @property
    def gdr_disabled(self) -> tuple[tuple[str, NcclLine], ...]:
        """HCAs NCCL said GPU Direct RDMA is disabled for, with its line."""
        return tuple((h, ln) for h, (on, ln) in self.gdr.items() if not on)

    def record(self) -> dict[str, object]:
        """JSON-able form: transport, HCAs, GDR per HCA, channel transports (for ``effective``)."""
        return {
            "net_transport": self.net_transport,
            "hcas": [f"{h}/{link}" for h, link in self.hcas],
            "gdr": {h: on for h, (on, _) in self.gdr.items()},
            "channels": dict(self.channels),
            "nvls": {d: on for d, (on, _) in self.nvls.items()},
            "nvls_channels": self.nvls_channels[0] if self.nvls_channels else None,
            "nvls_used": self.nvls_used,
            "nvls_failures": [ln.text for ln in self.nvls_failures[:3]],
            "collnet": bool(self.collnet),
            "collnet_plugin": self.collnet_plugin.text if self.collnet_plugin else None,
            "algorithms": dict(self.algorithms),
        }


@dataclass(frozen=True)
class NcclTestRun:
    """One nccl-tests invocation (one parameter line / one results table).

    ``min_bytes``/``max_bytes`` are the requested sweep (parameter line); ``max_size_bytes``
    the largest size actually reached. ``oob_values`` is the ``Out of bounds values`` count and
    ``avg_busbw_gbps`` the ``Avg bus bandwidth`` (mean of all oop and ip busbw values).
    """

    test_name: str | None = None
    nccl_tests_version: str | None = None
    nccl_version: str | None = None
    n_threads: int | None = None
    n_gpus: int | None = None
    min_bytes: int | None = None
    max_bytes: int | None = None
    iters: int | None = None
    warmup_iters: int | None = None
    validation: int | None = None
    ranks: tuple[NcclRank, ...] = ()
    columns: tuple[str, ...] = ()
    check_column: str | None = None
    rows: tuple[NcclRow, ...] = ()
    oob_values: int | None = None
    oob_ok: bool | None = None
    avg_busbw_gbps: float | None = None
    failures: tuple[NcclFailure, ...] = ()
    nccl_warnings: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    failure: ToolFailure | None = None
    path: NcclPath = NcclPath()
    effective: Mapping[str, object] = effective_field()

    @property
    def hostnames(self) -> tuple[str, ...]:
        """Distinct hosts of the rank lines, in first-seen order."""
        return tuple(dict.fromkeys(r.host for r in self.ranks))

    @property
    def gpu_names(self) -> tuple[str, ...]:
        """Distinct GPU names of the rank lines."""
        return tuple(dict.fromkeys(r.gpu_name for r in self.ranks))

    @property
    def reduced_max_bytes(self) -> int | None:
        """The maxBytes nccl-tests lowered the sweep to (``Reducing maxBytes to N due to memory
        limitation``), or None when it printed no such line."""
        value = self.effective.get("reduced_max_bytes")
        return value if isinstance(value, int) else None

    @property
    def blocks(self) -> tuple[NcclBlock, ...]:
        """The table split where the data type, op or root changes, in printed order (one
        block for a single-type run)."""
        out: list[NcclBlock] = []
        for r in self.rows:
            key = (r.dtype, r.redop, r.root)
            if out and (out[-1].dtype, out[-1].redop, out[-1].root) == key:
                last = out[-1]
                out[-1] = NcclBlock(last.dtype, last.redop, last.root, (*last.rows, r))
            else:
                out.append(NcclBlock(r.dtype, r.redop, r.root, (r,)))
        return tuple(out)

    @property
    def max_size_bytes(self) -> int | None:
        """Largest size reached in the table, or None with no rows."""
        return max((r.size_bytes for r in self.rows), default=None)

    @property
    def peak_busbw_gbps(self) -> float | None:
        """Highest busbw of any row, oop or ip, GB/s."""
        return max((r.busbw_gbps for r in self.rows), default=None)

    @property
    def wrong_total(self) -> int:
        """Sum of ``#wrong`` over all rows (legacy float errors are not counted here)."""
        return sum(r.wrong for r in self.rows)

    @property
    def completed(self) -> bool:
        """True when the summary (``Avg bus bandwidth``) was printed and no failure was seen."""
        return self.avg_busbw_gbps is not None and not self.failures and self.failure is None

    @property
    def reached_max_bytes(self) -> bool | None:
        """Whether the sweep reached the requested ``maxBytes`` (None when unknown)."""
        if self.max_bytes is None or self.max_size_bytes is None:
            return None
        # all_gather-style collectives round the size down to a multiple of ranks * type size
        return self.max_size_bytes * 2 > self.max_bytes

    @property
    def failure_reason(self) -> str | None:
        """Why this run is not a pass, from the tool's own signals; None when it passed."""
        if self.failures:
            f = self.failures[0]
            return f"{f.kind} failure at {f.site}: {f.message}"
        if self.failure is not None and self.failure.code != NO_SUMMARY:
            return self.failure.reason
        if not self.rows:
            return "no result rows"
        if self.oob_values:
            return f"out of bounds values: {self.oob_values}"
        if self.oob_ok is False:
            return "out of bounds check FAILED"
        if self.wrong_total:
            return f"#wrong = {self.wrong_total}"
        if self.avg_busbw_gbps is None:
            return "run stopped before the summary"
        return None

    @property
    def passed(self) -> bool:
        """True when rows exist, the summary printed, and no wrong/out-of-bounds/failure signal."""
        return self.failure_reason is None


@dataclass(frozen=True)
class NcclLog:
    """All the tests found in one log, in order."""

    tests: tuple[NcclTestRun, ...]
    warnings: tuple[str, ...] = ()
    failure: ToolFailure | None = None
    effective: Mapping[str, object] = effective_field()

    @property
    def passed(self) -> bool:
        """True when every test passed (False for an empty log)."""
        return bool(self.tests) and all(t.passed for t in self.tests)


#: :attr:`ToolFailure.code` of a run whose table stopped before its summary (no failure line).
NO_SUMMARY = "no summary"

_K = FailureKind

#: nccl-tests' failure wordings, NCCL's warning for a missing network plugin, and the
#: launchers' (Open MPI, Slurm, UCX) for a job that did not start or died.
FAILURES = FailureTable(
    [
        (
            re.compile(r"Test (?:NCCL|CUDA|NVML) failure \S+:\d+"),
            _K.INIT_FAILURE,
            "nccl-tests common.cu (2.x); crash_after_partial_output once the table started",
        ),
        (re.compile(r"^NCCL failure \S+:\d+"), _K.INIT_FAILURE, "nccl-tests 1.x (NCCL 1.0)"),
        (
            re.compile(r"NCCL WARN (?:Error: )?network (?P<code>.+?) not found"),
            _K.PLUGIN_NOT_LOADED,
            "NCCL 2.19+ net.cc: NCCL_NET names a network plugin that did not load",
        ),
        (
            re.compile(MPIRUN_RANK_DIED),
            _K.CRASH_AFTER_PARTIAL_OUTPUT,
            "Open MPI 4.x/5.x",
        ),
        (
            re.compile(
                r"mpirun was unable to (?:launch|find)|ORTE was unable to reliably start"
                r"|There are not enough slots available"
            ),
            _K.COULD_NOT_START,
            "Open MPI 4.x/5.x launch failures",
        ),
        (
            re.compile(MPIRUN_RANK_NONZERO),
            _K.CRASH_AFTER_PARTIAL_OUTPUT,
            "Open MPI 4.x: a rank exited non-zero",
        ),
        (
            re.compile("^" + SRUN_TASK_DIED),
            _K.CRASH_AFTER_PARTIAL_OUTPUT,
            "Slurm srun: a task died",
        ),
        (
            re.compile(r"\*\*\* (?:STEP|JOB) \S+ ON (?P<device>\S+) CANCELLED AT \S+(?P<code>.*?)\s*\*\*\*"),
            _K.CRASH_AFTER_PARTIAL_OUTPUT,
            "Slurm slurmstepd: step cancelled (time limit, scancel)",
        ),
        (re.compile(r"^srun: error: "), _K.COULD_NOT_START, "Slurm srun: the step did not start"),
        (
            re.compile(r"\bUCX\s+ERROR\b"),
            _K.COULD_NOT_START,
            "UCX (Open MPI pml ucx), before NCCL starts",
        ),
    ],
    binaries=r"\w+_perf(?:_mpi)?",
)

#: The rows of :data:`FAILURES` that are a launcher's words, not nccl-tests' (tried on lines no
#: nccl-tests rule took).
_LAUNCHER = FailureTable(FAILURES.rules[3:])


_PARAM_RE = re.compile(r"^#?\s*nThread\s+(\d+)\s+nGpus\s+(\d+)\s+minBytes\s+(\d+)\s+maxBytes\s+(\d+)")
_ITERS_RE = re.compile(r"(?<![a-z] )iters:\s*(\d+)")
_WARMUP_RE = re.compile(r"warmup iters:\s*(\d+)")
_VALID_RE = re.compile(r"validation:\s*(\d+)")
_STEP_RE = re.compile(r"step:\s*(\S+)")
_AGG_RE = re.compile(r"agg iters:\s*(\d+)")
_GRAPH_RE = re.compile(r"graph:\s*(\d+)")
_FAIL_AT_HOST_RE = re.compile(r"(?:^|\s)([\w.-]+): Test (?:NCCL|CUDA|NVML) failure")
#: A result row cut by a failure line printed straight after its redop (and root) cell, with no
#: space: ``8  2  float  sumzlabs-trainer: Test CUDA failure ...`` (nccl-tests#79)
_ROW_CUT_RE = re.compile(
    r"^\s*\d+\s+\d+\s+\w+\s+(?:sum|prod|min|max|avg|mulsum|premulsum|none)(?:\s+-?\d+)?(?=[\w.-]+: Test )"
)
_QUOTED_RE = re.compile(r"'([^']*)")
_INFO_VERSION_RE = re.compile(r"NCCL INFO NCCL version (\S+)")
_RANK_RE = re.compile(
    r"^#\s*Rank\s+(\d+)(?:\s+Group\s+(\d+))?(?:\s+Pid\s+(\d+))?\s+on\s+(\S+)\s+device\s+(\d+)\s+\[([^\]]*)\]\s*(.*)$"
)
_FAIL_RE = re.compile(r"(?:^|\s)(?:Test )?(NCCL|CUDA|Test|NVML)? ?failure (\S+:\d+)(?: '([^']*)')?")
_FAIL_HOST_RE = re.compile(r"^\s*(?:\.\.\s+)?([\w.-]+)(?::| pid \d+:)")
_NAME_RE = re.compile(r"\b(\w+_perf)\b")
_VERSION_RE = re.compile(r"nccl-tests version (\S+)(?:.*?nccl-library=(\d+))?")
_REDUCED_RE = re.compile(r"Reducing maxBytes to (\d+)")
_NCCL_VERSION_RE = re.compile(r"^NCCL version (\S+)")
_OOB_RE = re.compile(r"Out of bounds values\s*:\s*(\d+)\s*(\w+)?")
_AVG_RE = re.compile(r"Avg bus bandwidth\s*:\s*(\S+)")

_SIZE_NAMES = frozenset({"size", "bytes"})
_COUNT_NAMES = frozenset({"count", "N", "elements"})
_OP_NAMES = frozenset({"redop", "op"})
_CHECK_NAMES = frozenset({"#wrong", "wrong", "error", "res"})
_DEFAULT_LAYOUTS: dict[int, tuple[str, ...]] = {
    13: ("size", "count", "type", "redop", "root"),
    12: ("size", "count", "type", "redop"),
    11: ("size", "count", "type"),
}


def _error_text(quoted: str) -> str:
    """NCCL's error string from a failure line's quote, without the ``(run with NCCL_DEBUG=INFO
    for details)`` hint and the trailing `` / `` nccl-tests appends."""
    text = re.sub(r"\(run with NCCL_DEBUG=\w+ for details\)", "", quoted)
    return re.sub(r"[\s/]+$", "", text).strip()


class _Builder:
    """Mutable state of the test being read; frozen into an NcclTestRun by :meth:`build`.

    ``fail_lines`` are the ``Test ... failure`` lines as printed, ``launcher`` the launcher's
    failure lines, ``plugin`` NCCL's missing-plugin warning, ``last`` the last line that was
    not an NCCL INFO line (what a cut-off run printed last).
    """

    def __init__(self) -> None:
        self.f: dict[str, object] = {}
        self.params: dict[str, object] = {}
        self.ranks: list[NcclRank] = []
        self.rows: list[NcclRow] = []
        self.failures: list[NcclFailure] = []
        self.nccl_warnings: list[str] = []
        self.warnings: list[str] = []
        self.prefix: tuple[str, ...] | None = None
        self.columns: tuple[str, ...] = ()
        self.summary_seen = False
        self.summary_line: int | None = None
        self.fail_lines: list[tuple[int, str]] = []
        self.launcher: list[tuple[int, str]] = []
        self.plugin: tuple[int, str] | None = None
        self.last: tuple[int, str] | None = None
        self.networks: list[NcclLine] = []
        self.no_ib: NcclLine | None = None
        self.hcas: dict[str, str] = {}
        self.hca_lines: list[NcclLine] = []
        self.gdr: dict[str, tuple[bool, NcclLine]] = {}
        self.channels: dict[str, int] = {}
        self.channel_lines: dict[str, NcclLine] = {}
        self.info_lines = 0
        self.nvls: dict[str, tuple[bool, NcclLine]] = {}
        self.nvls_channels: tuple[int, NcclLine] | None = None
        self.nvls_setup: NcclLine | None = None
        self.nvls_failures: list[NcclLine] = []
        self.collnet_plugin: NcclLine | None = None
        self.collnet: list[NcclLine] = []
        self.algorithms: dict[str, int] = {}

    def path(self) -> NcclPath:
        """The NCCL path lines read so far, frozen."""
        return NcclPath(
            networks=tuple(self.networks),
            no_ib_device=self.no_ib,
            hcas=tuple(self.hcas.items()),
            hca_lines=tuple(self.hca_lines),
            gdr=types.MappingProxyType(dict(self.gdr)),
            channels=types.MappingProxyType(dict(self.channels)),
            channel_lines=types.MappingProxyType(dict(self.channel_lines)),
            info_lines=self.info_lines,
            nvls=types.MappingProxyType(dict(self.nvls)),
            nvls_channels=self.nvls_channels,
            nvls_setup=self.nvls_setup,
            nvls_failures=tuple(self.nvls_failures),
            collnet_plugin=self.collnet_plugin,
            collnet=tuple(self.collnet),
            algorithms=types.MappingProxyType(dict(self.algorithms)),
        )

    @property
    def empty(self) -> bool:
        return not (self.f or self.ranks or self.rows or self.failures or self.columns or self.launcher or self.plugin)

    @property
    def started(self) -> bool:
        """True once a parameter line, table header or row belongs to this test."""
        return "n_gpus" in self.f or bool(self.rows) or bool(self.columns)

    def build(self) -> NcclTestRun:
        if self.rows and "n_gpus" not in self.f:
            self.warnings.append(
                "no '# nThread ... nGpus' parameter line: the output starts after it (cut at "
                "the start?); the parameters are unknown"
            )
        keys = [(r.size_bytes, r.dtype, r.redop, r.root) for r in self.rows if r.size_bytes]
        if len(set(keys)) != len(keys):
            self.warnings.append("a size row is repeated: several communicators in one table?")
        self.exit_on_wrong_results()
        if "nccl_version" not in self.f and self.params.get("nccl_library"):
            code = int(str(self.params["nccl_library"]))
            self.f["nccl_version"] = f"{code // 10000}.{code // 100 % 100}.{code % 100}"
        return NcclTestRun(
            ranks=tuple(self.ranks),
            rows=tuple(self.rows),
            failures=tuple(self.failures),
            nccl_warnings=tuple(self.nccl_warnings),
            warnings=tuple(self.warnings),
            columns=self.columns,
            failure=self.tool_failure(),
            path=self.path(),
            effective=self.effective(),
            **self.f,  # type: ignore[arg-type]
        )

    def exit_on_wrong_results(self) -> None:
        """Bare ``Test failure common.cu:N`` lines printed after a complete summary that reports
        wrong results are nccl-tests' non-zero exit for those results: warnings, not failures.
        Without a wrong-results signal they stay failures (fail closed)."""
        after = self.summary_line
        if after is None or not self.failures:
            return
        wrong = bool(self.f.get("oob_values")) or self.f.get("oob_ok") is False
        wrong = wrong or any(r.wrong for r in self.rows)
        if not wrong or any(f.line < after or f.kind != "Test" for f in self.failures):
            return
        self.warnings.extend(
            f"line {f.line}: nccl-tests' exit after the summary on wrong results: Test failure {f.site}"
            for f in self.failures
        )
        self.failures.clear()
        self.fail_lines.clear()

    def tool_failure(self) -> ToolFailure | None:
        """The failure this test's output shows (see the module doc), or None."""
        table = bool(self.columns or self.rows)
        chain = [line for _, line in self.fail_lines[1:3]]
        if self.plugin is not None:
            first = [line for _, line in self.fail_lines[:1]]
            return FAILURES.failure(*self.plugin, detail=first + self.nccl_warnings[-1:])
        if self.fail_lines:
            no, line = self.fail_lines[0]
            qm = _QUOTED_RE.search(line)
            code = _error_text(qm.group(1)) if qm else None
            hm = _FAIL_AT_HOST_RE.search(_ROW_CUT_RE.sub(" ", line, count=1))
            kind = _K.CRASH_AFTER_PARTIAL_OUTPUT if table else _K.INIT_FAILURE
            detail = self.nccl_warnings[-2:] + chain + [ln for _, ln in self.launcher[:1]]
            return ToolFailure(kind, line, no, code or None, hm.group(1) if hm else None, tuple(detail))
        if self.launcher and not self.summary_seen:
            f = _LAUNCHER.failure(*self.launcher[0], detail=[ln for _, ln in self.launcher[1:3]])
            # no nccl-tests line at all: it never started; after its parameters: it died
            kind = _K.CRASH_AFTER_PARTIAL_OUTPUT if self.started else _K.COULD_NOT_START
            if f is not None and f.kind is not kind:
                return ToolFailure(kind, f.message, f.line, f.code, f.device, f.detail)
            return f
        if self.started and not self.summary_seen and self.last is not None:
            no, line = self.last
            return ToolFailure(
                _K.CRASH_AFTER_PARTIAL_OUTPUT,
                line,
                no,
                NO_SUMMARY,
                None,
                tuple(self.nccl_warnings[-2:]),
            )
        return None

    def effective(self) -> Mapping[str, object]:
        """What ran: the parameter line's values and the table's sizes, types and ops."""
        f, rows = self.f, self.rows
        return effective(
            test=f.get("test_name"),
            nccl_version=f.get("nccl_version"),
            nccl_tests_version=f.get("nccl_tests_version"),
            threads=f.get("n_threads"),
            gpus_per_thread=f.get("n_gpus"),
            min_bytes=f.get("min_bytes"),
            max_bytes=f.get("max_bytes"),
            reduced_max_bytes=self.params.get("reduced_max_bytes"),
            nccl_library=self.params.get("nccl_library"),
            step=self.params.get("step"),
            warmup_iters=f.get("warmup_iters"),
            iters=f.get("iters"),
            agg_iters=self.params.get("agg_iters"),
            validation=f.get("validation"),
            graph=self.params.get("graph"),
            ranks=len(self.ranks) or None,
            hosts=tuple(dict.fromkeys(r.host for r in self.ranks)) or None,
            net_transport=self.path().net_transport,
            sizes_bytes=tuple(dict.fromkeys(r.size_bytes for r in rows)),
            datatypes=tuple(dict.fromkeys(r.dtype for r in rows if r.dtype)) or None,
            redops=tuple(dict.fromkeys(r.redop for r in rows if r.redop)) or None,
        )


#: The first column of each half: ``time``, or ``cputime`` with ``-C 1``.
_TIME_NAMES = ("time", "cputime")


def _header(tokens: list[str]) -> tuple[tuple[str, ...], str | None] | None:
    """Split a header's tokens into its leading columns and its check column name."""
    first = next((i for i, t in enumerate(tokens) if t in _TIME_NAMES), None)
    if first is None or tokens[0] not in _SIZE_NAMES:
        return None
    prefix = tuple(tokens[:first])
    rest = tokens[len(prefix) :]
    check = next((t for t in rest if t in _CHECK_NAMES), None)
    return prefix, check


def _half(cells: list[str]) -> NcclResult | None:
    t, a, b = to_float(cells[0]), to_float(cells[1]), to_float(cells[2])
    if t is None or a is None or b is None:
        return None
    chk = cells[3] if len(cells) > 3 else "N/A"
    wrong: int | None = None
    err: float | None = None
    if chk != "N/A":
        wrong = to_int(chk)
        if wrong is None:
            err = to_float(chk)
            if err is None:
                return None
    return NcclResult(t, a, b, wrong, err)


def _plausible(row: NcclRow) -> bool:
    """True when each half of ``row`` is self-consistent (nccl-tests' definitions):
    time > 0; algbw at most size / time (+10% for rounding); busbw at most 2 x algbw
    (the largest bus factor, all_reduce's 2(n-1)/n)."""
    for half in (row.out_of_place, row.in_place):
        if half is None:
            continue
        if half.time_us <= 0 or half.algbw_gbps < 0 or half.busbw_gbps < 0:
            return False
        if half.busbw_gbps > 2 * half.algbw_gbps + 0.01:
            return False
        if half.algbw_gbps >= 0.1 and half.algbw_gbps > 1.1 * row.size_bytes / (half.time_us * 1e3):
            return False
    return True


@functools.lru_cache(maxsize=64)
def _layout(prefix: tuple[str, ...]) -> tuple[int, int, int | None, int | None, int | None]:
    """Indexes of (size, count, type, redop, root) in a header's leading columns."""

    def find(names: frozenset[str] | str) -> int | None:
        for i, name in enumerate(prefix):
            if (name == names) if isinstance(names, str) else (name in names):
                return i
        return None

    size = find(_SIZE_NAMES)
    count = find(_COUNT_NAMES)
    return (
        0 if size is None else size,
        -1 if count is None else count,
        find("type"),
        find(_OP_NAMES),
        find("root"),
    )


@functools.lru_cache(maxsize=64)
def _halves(columns: tuple[str, ...], n_prefix: int) -> tuple[int, bool] | None:
    """``(columns per half, timestamp column)`` of a 2.18+ header: per-iteration columns
    (``-I 1``: ``i_min i_max i_p99 i_cv%`` after each half's four) and/or a ``timestamp`` last
    (``-S 1``, printed ``YYYY-MM-DD HH:MM:SS``: two tokens). None for the classic layouts."""
    rest = columns[n_prefix:]
    stamped = rest[-1:] == ("timestamp",)
    body = rest[:-1] if stamped else rest
    starts = [i for i, t in enumerate(body) if t in _TIME_NAMES]
    if len(starts) != 2 or starts[1] < 4 or (starts[1] == 4 and not stamped):
        return None
    return starts[1], stamped


def _row(no: int, tokens: list[str], prefix: tuple[str, ...], columns: tuple[str, ...] = ()) -> NcclRow | None:
    n = len(prefix)
    rest_len = len(tokens) - n
    shape = _halves(columns, n) if columns else None
    if shape is not None:
        half, stamped = shape
        if rest_len != 2 * half + (2 if stamped else 0):
            return None
        # the four columns of each half; the per-iteration statistics are not kept
        tokens = tokens[: n + 4] + tokens[n + half : n + half + 4]
        rest_len = 8
    if rest_len not in (4, 8, 3, 6):
        return None
    i_size, i_count, i_type, i_op, i_root = _layout(prefix)
    size = to_int(tokens[i_size])
    count = to_int(tokens[i_count]) if i_count >= 0 else 0
    if size is None or count is None:
        return None
    rest = tokens[n:]
    width = 4 if rest_len in (4, 8) else 3
    oop = _half(rest[:width])
    ip = _half(rest[width:]) if rest_len > width else None
    if oop is None or (rest_len > width and ip is None):
        return None
    op = tokens[i_op] if i_op is not None else None
    root = to_int(tokens[i_root]) if i_root is not None else None
    dtype = tokens[i_type] if i_type is not None else ""
    return NcclRow(no, size, count, dtype, op, root, oop, ip)


def _read_params(b: _Builder, line: str, m: re.Match[str]) -> None:
    b.f.update(
        n_threads=int(m.group(1)),
        n_gpus=int(m.group(2)),
        min_bytes=int(m.group(3)),
        max_bytes=int(m.group(4)),
    )
    for key, rx in (("iters", _ITERS_RE), ("warmup_iters", _WARMUP_RE), ("validation", _VALID_RE)):
        mm = rx.search(line)
        if mm:
            b.f[key] = int(mm.group(1))
    for key, rx in (("agg_iters", _AGG_RE), ("graph", _GRAPH_RE)):
        mm = rx.search(line)
        if mm:
            b.params[key] = int(mm.group(1))
    sm = _STEP_RE.search(line)
    if sm:
        b.params["step"] = sm.group(1)


def _rank(m: re.Match[str]) -> NcclRank:
    """The :class:`NcclRank` of a :data:`_RANK_RE` match."""
    return NcclRank(
        rank=int(m.group(1)),
        host=m.group(4),
        device=int(m.group(5)),
        bus_id=m.group(6),
        gpu_name=m.group(7).strip(),
        pid=int(m.group(3)) if m.group(3) else None,
        group=int(m.group(2)) if m.group(2) else None,
    )


def _read_oob(b: _Builder, m: re.Match[str]) -> None:
    b.f["oob_values"] = int(m.group(1))
    b.f["oob_ok"] = (m.group(2) or "").upper() != "FAILED" and int(m.group(1)) == 0


_NETWORK_RE = re.compile(r"NCCL INFO Using network (\S.*?)\s*$")
_NO_IB_RE = re.compile(r"NCCL INFO NET/IB : No device found")
_HCAS_RE = re.compile(r"NCCL INFO NET/IB : Using ((?:\[\d+\]\S+\s*)+)")
_HCA_RE = re.compile(r"\[\d+\]([\w.-]+:\d+)/(\w+)")
_GDR_RE = re.compile(r"GPU Direct RDMA (Enabled|Disabled) for (?:GPU \S+ / )?HCA (\d+)(?: '([\w.-]+)')?")
_CHANNEL_RE = re.compile(r"NCCL INFO Channel \d+(?:/\d+)? : .* via (\S+)")


_NVLS_SUPPORT_RE = re.compile(r"NVLS multicast support is (not )?available on dev (\d+)")
_NVLS_CHANNELS_RE = re.compile(r"NCCL INFO \d+ coll channels, (?:\d+ collnet channels, )?(\d+) nvls channels")
_NVLS_SETUP_RE = re.compile(r"NCCL INFO (?:NVLS comm 0x[0-9a-f]+ headRank|Connected NVLS)")
#: NCCL WARN lines of the NVLS transport (transport/nvls.cc; NCCL 2.2x words the bind failure)
_NVLS_WARN_RE = re.compile(r"Failed to bind NVLink SHARP \(NVLS\)|transport/nvls\.cc:\d+ (?:\(\w+\) )?NCCL WARN")
_COLLNET_PLUGIN_RE = re.compile(r"NCCL INFO NET/Plugin ?: Loaded collnet plugin")
_COLLNET_RE = re.compile(r"NCCL INFO (?:Connected )?Collnet Chains|NCCL INFO CollNet .*[Cc]onnected|via COLLNET", re.I)
#: the host of an NCCL line: ``gpu-node-0001:6899:6960 [0] ...`` (host:pid:tid)
#: NCCL's tuning line (src/enqueue.cc, NCCL_DEBUG_SUBSYS=TUNING): ``AllReduce: 8 Bytes -> Algo RING proto LL``
_ALGO_RE = re.compile(r"NCCL INFO \w+: \d+ Bytes -> Algo ([A-Za-z_]+) proto ")
_LINE_HOST_RE = re.compile(r"^(?:\[[^\]]*\]\s*)?([\w.-]+):\d+:\d+ \[")


def _read_nvls(b: _Builder, here: NcclLine) -> bool:
    """The NVLS and CollNet lines of an NCCL INFO line (:class:`NcclPath`), into ``b``; True
    when the line was one."""
    line = here.text
    if m := _NVLS_SUPPORT_RE.search(line):
        hm = _LINE_HOST_RE.match(line)
        key = f"{hm.group(1)} dev {m.group(2)}" if hm else f"dev {m.group(2)}"
        on = m.group(1) is None
        if key not in b.nvls or (b.nvls[key][0] and not on):
            b.nvls[key] = (on, here)
    elif m := _NVLS_CHANNELS_RE.search(line):
        if b.nvls_channels is None or int(m.group(1)) < b.nvls_channels[0]:
            b.nvls_channels = (int(m.group(1)), here)
    elif _NVLS_SETUP_RE.search(line):
        b.nvls_setup = b.nvls_setup or here
    elif _COLLNET_PLUGIN_RE.search(line):
        b.collnet_plugin = b.collnet_plugin or here
    elif _COLLNET_RE.search(line):
        b.collnet.append(here)
    elif m := _ALGO_RE.search(line):
        algo = m.group(1).upper()
        b.algorithms[algo] = b.algorithms.get(algo, 0) + 1
    else:
        return False
    return True


def _read_path(b: _Builder, no: int, line: str) -> None:
    """The path lines of an NCCL INFO line (:class:`NcclPath`), into ``b``."""
    here = NcclLine(no, line.strip())
    b.info_lines += 1
    if _read_nvls(b, here):
        return
    if m := _NETWORK_RE.search(line):
        b.networks.append(here)
    elif _NO_IB_RE.search(line):
        b.no_ib = b.no_ib or here
    elif m := _HCAS_RE.search(line):
        b.hca_lines.append(here)
        for dev, link in _HCA_RE.findall(m.group(1)):
            b.hcas.setdefault(dev, link)
    elif m := _GDR_RE.search(line):
        name = m.group(3) or f"HCA {m.group(2)}"
        on = m.group(1) == "Enabled"
        if name not in b.gdr or (b.gdr[name][0] and not on):
            b.gdr[name] = (on, here)
    elif m := _CHANNEL_RE.search(line):
        b.channels[m.group(1)] = b.channels.get(m.group(1), 0) + 1
        way = re.search(r"\[(send|receive)\] via", line)
        b.channel_lines.setdefault(f"[{way.group(1)}] {m.group(1)}" if way else m.group(1), here)


class _Reader:
    """State across the tests of one log; its methods are the handlers of :data:`_LINES`
    (every line) and :data:`_COMMENT` (``#`` lines, which see the line without its ``#``).

    ``pending_name``/``pending_version`` come from lines printed before the parameter line of
    the test they belong to (``Running: ...``, ``# Collective test starting``, the version line).
    """

    def __init__(self) -> None:
        self.done: list[NcclTestRun] = []
        self.b = _Builder()
        self.pending_name: str | None = None
        self.pending_version: str | None = None
        self.pending_library: int | None = None
        self.line = ""  # the '#' line being read, as printed

    def close(self) -> None:
        """Freeze the open test (unless it is empty) and start a new one."""
        if not self.b.empty:
            self.done.append(self.b.build())
        self.b = _Builder()

    def close_started(self) -> None:
        """Close the open test if it has begun (the line starts a new test)."""
        if self.b.started:
            self.close()

    def log(self, text: str) -> NcclLog:
        """Close the last test and return the log; ParseError when no test was found."""
        self.close()
        runs = tuple(t for t in self.done if t.n_gpus is not None or t.rows or t.failures or t.columns or t.failure)
        if not runs:
            raise not_tool_output(TOOL, "'# nThread ...' line, a results table or a failure line", text)
        return NcclLog(
            tests=runs,
            failure=next((t.failure for t in runs if t.failure), None),
            effective=effective(tests=tuple(t.test_name or "?" for t in runs)),
        )

    # -- every line ------------------------------------------------------------------------

    def comment(self, no: int, line: str, _m: re.Match[str]) -> None:
        self.line = line
        _COMMENT(self, no, line.lstrip("#").strip())

    def row(self, no: int, line: str, _m: re.Match[str]) -> bool:
        """A size row, read by the header's columns, else by column count; declines a digit
        line that is no row."""
        b = self.b
        tokens = line.split()
        prefix = b.prefix or _DEFAULT_LAYOUTS.get(len(tokens)) or _DEFAULT_LAYOUTS.get(len(tokens) + 2)
        row = _row(no, tokens, prefix, b.columns if b.prefix else ()) if prefix else None
        if row is None and b.prefix is not None:
            fallback = _DEFAULT_LAYOUTS.get(len(tokens))
            row = _row(no, tokens, fallback) if fallback else None
            if row is not None and not _plausible(row):
                # a row cut off mid-line (a killed job) read by column count shifts
                # time into algbw and algbw into busbw: such a reading is dropped
                b.warnings.append(
                    f"line {no}: row does not match the header and reads implausibly (cut off?): not read"
                )
                return True
            if row is not None:
                b.warnings.append(f"line {no}: row does not match the header; read by column count")
        if row is None:
            return False
        if b.summary_seen:  # a table after a summary: the next test, same columns
            self.close()
            self.b.prefix = b.prefix
        self.b.rows.append(row)
        return True

    def bare_summary(self, no: int, line: str, _m: re.Match[str]) -> None:
        """The summary lines without the leading ``#`` (some builds print them so)."""
        m = _AVG_RE.search(line)
        if m and to_float(m.group(1)) is not None:
            self.b.f["avg_busbw_gbps"] = to_float(m.group(1))
            self.b.summary_seen = True
            self.b.summary_line = no
        m2 = _OOB_RE.search(line)
        if m2:
            _read_oob(self.b, m2)

    def nccl_warning(self, no: int, line: str, _m: re.Match[str]) -> None:
        self.b.nccl_warnings.append(line)
        if _NVLS_WARN_RE.search(line):
            self.b.nvls_failures.append(NcclLine(no, line.strip()))
        hit = FAILURES.match(line)
        if hit and hit[0] is _K.PLUGIN_NOT_LOADED and self.b.plugin is None:
            self.b.plugin = (no, line)

    def nccl_info(self, no: int, line: str, _m: re.Match[str]) -> None:
        """An NCCL INFO line; ``NCCL INFO NCCL version X`` (NCCL_DEBUG=INFO) names the version."""
        vm = _INFO_VERSION_RE.search(line)
        if vm and "nccl_version" not in self.b.f:
            self.b.f["nccl_version"] = vm.group(1)
        _read_path(self.b, no, line)

    def failure(self, no: int, line: str, m: re.Match[str]) -> None:
        hm = _FAIL_HOST_RE.match(line) or _FAIL_AT_HOST_RE.search(_ROW_CUT_RE.sub(" ", line, count=1))
        host = hm.group(1) if hm and hm.group(1) not in ("Test", "NCCL", "CUDA") else None
        if host and host.isdigit():  # a row cut off by the failure: its size, not a host
            host = None
        self.b.failures.append(NcclFailure(no, m.group(1) or "Test", m.group(2), m.group(3) or "", host))
        self.b.fail_lines.append((no, line))

    def launcher(self, no: int, line: str, _m: re.Match[str]) -> None:
        """A launcher's failure line (Open MPI, srun, UCX)."""
        if self.b.summary_seen:
            self.b.warnings.append(f"line {no}: after the summary: {line}")
        else:
            self.b.launcher.append((no, line))

    def nccl_version(self, no: int, line: str, _m: re.Match[str]) -> None:
        m = _NCCL_VERSION_RE.match(line)
        if m:
            self.b.f["nccl_version"] = m.group(1)

    def test_name(self, no: int, line: str, m: re.Match[str]) -> None:
        """A ``Running: ... all_reduce_perf ...`` line: the name of the next test."""
        self.close_started()
        if "test_name" not in self.b.f:
            self.pending_name = m.group(1)

    # -- '#' lines, seen without the '#' -----------------------------------------------------

    def params(self, no: int, body: str, _m: re.Match[str]) -> None:
        m = _PARAM_RE.match(body)
        if m is None:
            return
        self.close_started()
        _read_params(self.b, body, m)
        if self.pending_name:
            self.b.f["test_name"] = self.pending_name
        if self.pending_version:
            self.b.f["nccl_tests_version"] = self.pending_version
        if self.pending_library:
            self.b.params["nccl_library"] = self.pending_library
        self.pending_name = self.pending_version = self.pending_library = None

    def rank(self, no: int, body: str, _m: re.Match[str]) -> None:
        m = _RANK_RE.match(self.line)
        if m:
            self.b.ranks.append(_rank(m))
        else:
            self.b.warnings.append(f"line {no}: unreadable rank line")

    def collective(self, no: int, body: str, _m: re.Match[str]) -> None:
        self.close_started()
        self.pending_name = body.partition(":")[2].strip() or None

    def version(self, no: int, body: str, _m: re.Match[str]) -> None:
        m = _VERSION_RE.search(body)
        self.close_started()
        self.pending_version = m.group(1) if m else None
        self.pending_library = int(m.group(2)) if m and m.group(2) else None

    def oob(self, no: int, body: str, _m: re.Match[str]) -> None:
        m = _OOB_RE.search(body)
        if m:
            _read_oob(self.b, m)

    def avg(self, no: int, body: str, _m: re.Match[str]) -> None:
        m = _AVG_RE.search(body)
        val = to_float(m.group(1)) if m else None
        if val is None:
            self.b.warnings.append(f"line {no}: unreadable average bus bandwidth")
        else:
            self.b.f["avg_busbw_gbps"] = val
        self.b.summary_seen = True
        self.b.summary_line = no

    def reduced(self, no: int, body: str, m: re.Match[str]) -> None:
        """``Reducing maxBytes to N due to memory limitation``: the sweep's real end."""
        self.b.params["reduced_max_bytes"] = int(m.group(1))

    def header(self, no: int, body: str) -> None:
        """Any other ``#`` line: a table header (which may start the next test), or a note."""
        tokens = body.split()
        hdr = _header(tokens) if tokens else None
        if hdr:
            if self.b.summary_seen or self.b.rows:
                self.close()
            self.b.prefix, self.b.f["check_column"] = hdr
            self.b.columns = tuple(tokens)
        elif body.startswith("Truncated"):
            self.b.warnings.append(f"line {no}: {body}")


#: Every non-blank line, launcher tag removed, left-stripped.
_LINES: LineDispatch[_Reader] = LineDispatch(
    [
        (("#", "nThread"), _Reader.comment),
        (lambda s: s[0].isdigit(), _Reader.row),
        (("Avg bus bandwidth", "Out of bounds"), _Reader.bare_summary),
        (re.compile("NCCL WARN"), _Reader.nccl_warning),
        (re.compile("NCCL INFO"), _Reader.nccl_info),
        (_FAIL_RE, _Reader.failure),
        ("NCCL version", _Reader.nccl_version),
        (lambda s: _LAUNCHER.match(s) is not None, _Reader.launcher),
        (_NAME_RE, _Reader.test_name),
    ]
)

#: ``#`` lines (and a parameter line printed without ``#``), seen without the ``#``.
_COMMENT: LineDispatch[_Reader] = LineDispatch(
    [
        ("nThread", _Reader.params),
        ("Rank", _Reader.rank),
        ("Collective test starting", _Reader.collective),
        ("nccl-tests version", _Reader.version),
        ("Out of bounds", _Reader.oob),
        ("Avg bus bandwidth", _Reader.avg),
        (_REDUCED_RE, _Reader.reduced),
    ],
    default=_Reader.header,
)


@guarded(TOOL)
def parse(text: str) -> NcclLog:
    """Parse a nccl-tests log into an :class:`NcclLog` with one :class:`NcclTestRun` per test.

    Raises:
        ParseError: not nccl-tests output: no parameter line, table header, result row, failure
            line or launcher failure line was found.
    """
    reader = _Reader()
    for no, line in numbered_lines(text, strip_prefix=True):
        s = line.lstrip()
        if s:
            read = _LINES(reader, no, s)
            # the last line printed: one the parser read, or a row cut off mid-line; not a
            # poster's line nothing reads ("[... snipped ...]" after the rank list of an excerpt)
            if "NCCL INFO" not in s and (read or s[0].isdigit()):
                reader.b.last = (no, s.strip())
    return reader.log(text)


#: A result row as nccl-tests prints it (size, count, type, redop, root, time), an Open MPI
#: rank tag allowed before it: what a log cut before its banner and header still shows.
_ROW_SHAPE_RE = re.compile(
    r"^(?:\[\d+,\d+\]<std(?:out|err)>:)?\s*\d+\s+\d+\s+(?:float|double|half|bfloat16|u?int(?:8|32|64)|f8e4m3|f8e5m2)\s+"
    r"(?:sum|prod|max|min|avg|none|mulsum|premulsum)\s+-?\d+\s+[\d.]+",
    re.M,
)


#: A whole result row (both halves: time, algbw, busbw and #wrong or error, out of place and in
#: place) or the whole column header: the shapes a line a mail client wrapped is joined back to
#: (``as_pasted``).
WRAPPED_SHAPE = re.compile(
    r"^(?:\[\d+,\d+\]<std(?:out|err)>:)?\s*\d+\s+\d+\s+"
    r"(?:float|double|half|bfloat16|u?int(?:8|32|64)|f8e4m3|f8e5m2)"
    r"(?:\s+(?:sum|prod|max|min|avg|none|mulsum|premulsum))?(?:\s+-?\d+)?"
    r"(?:\s+(?:N/A|[-+\d.eE]+)){8}\s*$"
    # the whole column header (both halves), which names the columns the rows are read by
    r"|^(?:\[\d+,\d+\]<std(?:out|err)>:)?#\s+size\s+count\s+type(?:\s+redop)?(?:\s+root)?"
    r"(?:\s+time\s+algbw\s+busbw\s+(?:#wrong|wrong|error|res)){2}\s*$"
)


def detect(text: str) -> bool:
    """True when ``text`` looks like nccl-tests output: a parameter line, a results header, a
    failure line, or (a log cut before them) at least two result rows."""
    head = text[:20000]
    if len(_ROW_SHAPE_RE.findall(head, 0, 20000)) >= 2:
        return True
    if ("nThread" in head and "minBytes" in head) or (
        "busbw" in head and "algbw" in head and ("#wrong" in head or " error" in head or " res" in head)
    ):
        return True
    lines = head.splitlines()
    own = FailureTable(FAILURES.rules[:3])  # nccl-tests' and NCCL's own wordings
    if any(own.match(ln) for ln in lines):
        return True
    return bool(_NAME_RE.search(head)) and any(_LAUNCHER.match(ln) for ln in lines)
