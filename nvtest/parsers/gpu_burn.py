"""Parser for gpu-burn (wilicc/gpu-burn, 2015 through current master).

Reads the device lines (``GPU 0: NAME (UUID: GPU-...)``), the progress lines
(``NN.N%  proc'd: N (G Gflop/s) - ...   errors: E  (WARNING!)- ...   temps: T C - ...``; counts
may be negative and the ``(WARNING!)``/``(DIED!)`` tags may be glued to the next ``-``), init
errors (``Couldn't init a GPU test``), ``No clients are alive!  Aborting``, and the ``Tested N
GPUs:`` summary. gpu-burn exits 0 whatever it finds, so the verdict comes only from this text:
a GPU passes only when the summary says OK, work was measured (iterations and Gflop/s > 0), its
error counter is 0 and it did not die. The last progress line holds the final values.

Failures (:data:`FAILURES`): ``Couldn't init CUDA``/``Couldn't init a GPU test`` (``init_failure``,
even when the summary later says OK), ``No CUDA devices`` (``no_device``), ``No clients are
alive!  Aborting``, ``Failure during compute``, an uncaught C++ exception
(``crash_after_partial_output``). FAULTY GPUs are a result, not a failure of the tool. Device
lines alone (``GPU 0: NAME (UUID: ...)``, which ``nvidia-smi -L`` prints too) are not gpu-burn's
output (ParseError). ``effective``: GPUs listed, the burn duration, precision, result size and
planned iterations, progress reached.
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
)

TOOL = "gpu-burn"
DESCRIPTION = "gpu-burn: per-GPU Gflop/s, error counts, temperatures and the OK/FAULTY summary"

__all__ = ["FAILURES", "GpuBurnGpu", "GpuBurnResult", "detect", "parse"]

_K = FailureKind

#: gpu-burn's failure wordings (wilicc/gpu-burn, 2015 through 2025 master).
#: gpu-burn's own sentences (gpu_burn-drv.cpp), passed over on purpose: not a poster's.
OWN_SENTENCES = re.compile(
    r"^(?:Run length not specified|Killing processes|Burning for|Using compare file"
    r"|Initialized device)"
)

FAILURES = FailureTable(
    [
        (
            re.compile(r"Couldn't init CUDA: (?P<code>.*)$"),
            _K.INIT_FAILURE,
            "gpu-burn 2023+ (gpu_burn-drv.cpp)",
        ),
        (
            re.compile(r"Couldn't init a GPU test: (?P<code>.*)$"),
            _K.INIT_FAILURE,
            "gpu-burn, all versions",
        ),
        (re.compile(r"^No CUDA devices"), _K.NO_DEVICE, "gpu-burn 2023+"),
        (
            re.compile(r"^No clients are alive!"),
            _K.CRASH_AFTER_PARTIAL_OUTPUT,
            "gpu-burn: every worker died",
        ),
        (
            re.compile(r"Failure during compute: (?P<code>.*)$"),
            _K.CRASH_AFTER_PARTIAL_OUTPUT,
            "gpu-burn worker error",
        ),
        (
            re.compile(r"terminate called after throwing an instance of '(?P<code>[^']+)'"),
            _K.CRASH_AFTER_PARTIAL_OUTPUT,
            "gpu-burn without a driver (uncaught exception)",
        ),
    ],
    binaries=r"gpu_burn|gpu-burn",
)
_BURN_RE = re.compile(r"Burning for (\d+) (?:seconds|secs)")


@dataclass(frozen=True)
class GpuBurnGpu:
    """One GPU: summary status (``OK``/``FAULTY``/None when no summary) and last progress values."""

    index: int
    status: str | None = None
    name: str | None = None
    uuid: str | None = None
    iterations: int | None = None
    gflops: float | None = None
    errors: int | None = None
    error_tag: str | None = None
    temp_c: int | None = None
    memory_total_mb: int | None = None
    memory_available_mb: int | None = None
    memory_used_mb: int | None = None

    @property
    def died(self) -> bool:
        """True when the worker for this GPU died (``(DIED!)`` tag or ``proc'd: -1``)."""
        return self.error_tag == "DIED!" or (self.iterations is not None and self.iterations < 0)

    @property
    def failure_reason(self) -> str | None:
        """Why this GPU does not pass; None when it passed."""
        if self.died:
            return "worker died"
        if self.status == "FAULTY":
            return "compare errors (FAULTY)"
        if self.errors:
            return f"error counter {self.errors}"
        if self.status is None:
            return "no summary for this GPU"
        if self.status != "OK":
            return f"status {self.status}"
        if not self.iterations or not self.gflops:
            return "OK but no throughput measured"
        return None

    @property
    def passed(self) -> bool:
        """True only for OK with measured work, zero errors and a live worker."""
        return self.failure_reason is None


@dataclass(frozen=True)
class GpuBurnResult:
    """A gpu-burn run. ``tested_count`` is N of ``Tested N GPUs`` (None when absent)."""

    gpus: tuple[GpuBurnGpu, ...]
    progress_pct: float | None = None
    progress_lines: int = 0
    tested_count: int | None = None
    aborted: bool = False
    precision: str | None = None
    result_bytes: int | None = None
    planned_iterations: int | None = None
    init_errors: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    failure: ToolFailure | None = None
    effective: Mapping[str, object] = effective_field()

    @property
    def failure_reason(self) -> str | None:
        """Why the run does not pass (first reason found); None when every GPU passed."""
        if self.failure is not None and self.failure.kind is _K.NO_DEVICE:
            return self.failure.reason
        if self.aborted:
            return "no clients alive: run aborted"
        if self.init_errors:
            return f"init error: {self.init_errors[0]}"
        if self.tested_count is None:
            return "no 'Tested N GPUs' summary"
        if not self.gpus:
            return "no GPU tested"
        for g in self.gpus:
            reason = g.failure_reason
            if reason:
                return f"GPU {g.index}: {reason}"
        return None

    @property
    def passed(self) -> bool:
        """True only when the summary exists and every GPU passed (see :attr:`GpuBurnGpu.passed`)."""
        return self.failure_reason is None


_PROGRESS_RE = re.compile(r"^(\d+(?:\.\d+)?)%\s+proc'd:(.*?)errors:(.*?)(?:temps:(.*))?$")
_PROCD_RE = re.compile(r"(-?\d+) \((-?[\d.]+) Gflop/s\)")
_ERR_RE = re.compile(r"(-?\d+)\s*(?:\(([A-Z]+!)\))?")
_TEMP_RE = re.compile(r"(-?\d+) C")
_DEVICE_RE = re.compile(r"^GPU (\d+): (.+?)(?: \(UUID: ([^)]+)\))?$")
_STATUS_RE = re.compile(r"^GPU (\d+): (OK|FAULTY|\w+)$")
_INIT_RE = re.compile(
    r"^Initialized device (\d+) with (\d+) MB of memory \((\d+) MB available, using (\d+) MB of it\), using (\w+)"
)
_RESULTS_RE = re.compile(r"^Results are (\d+) bytes each, thus performing (\d+) iterations")
_TESTED_RE = re.compile(r"^Tested (\d+) GPUs?:")


#: The last progress line: percent done, (iterations, Gflop/s), (errors, tag), temperatures.
_Progress = tuple[float, list[tuple[int, float]], list[tuple[int, str | None]], list[int]]


class _Reader:
    """What the lines of one run said, per GPU index; the handlers of :data:`_LINES`."""

    def __init__(self) -> None:
        self.names: dict[int, tuple[str, str | None]] = {}
        self.status: dict[int, str] = {}
        self.memory: dict[int, tuple[int, int, int]] = {}
        self.last: _Progress | None = None
        self.lines = 0
        self.tested: int | None = None
        self.aborted = False
        self.in_summary = False
        self.init_errors: list[str] = []
        self.warnings: list[str] = []
        self.extra: dict[str, object] = {}
        self.failure: ToolFailure | None = None
        self.burn_s: int | None = None
        self.anchored = False  # a line only gpu-burn prints was read

    def progress(self, no: int, line: str, _m: re.Match[str]) -> None:
        m = _PROGRESS_RE.match(line)
        if not m:
            self.warnings.append(f"line {no}: unreadable progress line")
            return
        procd = [(int(a), float(b)) for a, b in _PROCD_RE.findall(m.group(2))]
        errs = [(int(a), t or None) for a, t in _ERR_RE.findall(m.group(3))]
        temps = [int(t) for t in _TEMP_RE.findall(m.group(4) or "")]
        self.last = (float(m.group(1)), procd, errs, temps)
        self.lines += 1

    def summary(self, no: int, line: str, m: re.Match[str]) -> None:
        self.tested = int(m.group(1))
        self.in_summary = True

    def gpu_status(self, no: int, line: str, m: re.Match[str]) -> bool:
        """``GPU 0: OK`` in the summary (declined before it: a device line)."""
        if not self.in_summary:
            return False
        self.status[int(m.group(1))] = m.group(2)
        return True

    def initialized(self, no: int, line: str, m: re.Match[str]) -> None:
        self.memory[int(m.group(1))] = (int(m.group(2)), int(m.group(3)), int(m.group(4)))
        self.extra["precision"] = m.group(5)

    def results(self, no: int, line: str, m: re.Match[str]) -> None:
        self.extra["result_bytes"] = int(m.group(1))
        self.extra["planned_iterations"] = int(m.group(2))

    def device(self, no: int, line: str, m: re.Match[str]) -> bool:
        """``GPU 0: NAME (UUID: ...)`` before the summary (declined in it)."""
        if self.in_summary:
            return False
        self.names[int(m.group(1))] = (m.group(2), m.group(3))
        return True

    def other(self, no: int, line: str) -> None:
        """Any other line: a failure line, the abort message, an init error, or ignored."""
        f = FAILURES.failure(no, line)
        if f is not None:
            self.failure = self.failure or f
            self.anchored = True
        bm = _BURN_RE.search(line)
        if bm:
            self.burn_s = int(bm.group(1))
        if line.startswith(("Burning for", "Run length not specified", "Using compare file", "Killing processes")):
            self.anchored = True
        if line.startswith("No clients are alive"):
            self.aborted = True
        elif (
            line.startswith("Couldn't init")
            or "CUDA_ERROR" in line
            or "CUBLAS_STATUS" in line
            or line.startswith("Error")
        ):
            self.init_errors.append(line)

    def gpu(self, i: int) -> GpuBurnGpu:
        """GPU ``i`` from its device line, summary status, memory line and the last progress."""
        _, procd, errs, temps = self.last if self.last else (None, [], [], [])
        name, uuid = self.names.get(i, (None, None))
        mem = self.memory.get(i, (None, None, None))
        return GpuBurnGpu(
            index=i,
            status=self.status.get(i),
            name=name,
            uuid=uuid,
            iterations=procd[i][0] if i < len(procd) else None,
            gflops=procd[i][1] if i < len(procd) else None,
            errors=errs[i][0] if i < len(errs) else None,
            error_tag=errs[i][1] if i < len(errs) else None,
            temp_c=temps[i] if i < len(temps) else None,
            memory_total_mb=mem[0],
            memory_available_mb=mem[1],
            memory_used_mb=mem[2],
        )

    def result(self, text: str) -> GpuBurnResult:
        """The :class:`GpuBurnResult`; ParseError when no line only gpu-burn prints was read."""
        anchored = self.anchored or self.last is not None or self.tested is not None
        if not anchored and not self.memory:
            raise not_tool_output(TOOL, "'proc'd:' progress line, 'Tested N GPUs:' or a gpu-burn error", text)
        pct, procd, errs, temps = self.last if self.last else (None, [], [], [])
        n = max(
            len(procd),
            len(errs),
            len(temps),
            max(self.status, default=-1) + 1,
            max(self.names, default=-1) + 1,
        )
        if procd and errs and len(procd) != len(errs):
            self.warnings.append(f"progress line lists {len(procd)} throughputs but {len(errs)} error counts")
        if self.tested is not None and self.tested != len(self.status):
            self.warnings.append(f"summary says {self.tested} GPUs but lists {len(self.status)}")
        return GpuBurnResult(
            gpus=tuple(self.gpu(i) for i in range(n)),
            progress_pct=pct,
            progress_lines=self.lines,
            tested_count=self.tested,
            aborted=self.aborted,
            init_errors=tuple(self.init_errors),
            warnings=tuple(self.warnings),
            failure=self.failure,
            effective=effective(
                gpus_listed=len(self.names) or None,
                burn_s=self.burn_s,
                precision=self.extra.get("precision"),
                result_bytes=self.extra.get("result_bytes"),
                planned_iterations=self.extra.get("planned_iterations"),
                progress_pct=pct,
            ),
            **self.extra,  # type: ignore[arg-type]
        )


#: Every non-blank line, stripped.
_LINES: LineDispatch[_Reader] = LineDispatch(
    [
        (lambda s: "%" in s and "proc'd" in s, _Reader.progress),
        (_TESTED_RE, _Reader.summary),
        (_STATUS_RE, _Reader.gpu_status),
        (_INIT_RE, _Reader.initialized),
        (_RESULTS_RE, _Reader.results),
        (_DEVICE_RE, _Reader.device),
    ],
    default=_Reader.other,
)


@guarded(TOOL)
def parse(text: str) -> GpuBurnResult:
    """Parse gpu-burn output into a :class:`GpuBurnResult`.

    Raises:
        ParseError: not gpu-burn's output: no progress line, summary, start-up line or failure
            line of :data:`FAILURES` (device lines alone are not enough).
    """
    reader = _Reader()
    for no, line in numbered_lines(text):
        s = line.strip()
        if s:
            _LINES(reader, no, s)
    return reader.result(text)


def detect(text: str) -> bool:
    """True when ``text`` looks like gpu-burn output."""
    head = text[:20000]
    return (
        "proc'd:" in head
        or ("Tested " in head and ("GPU 0: OK" in head or ": FAULTY" in head))
        or ("Burning for" in head)
    )
