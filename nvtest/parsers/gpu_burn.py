"""Parser for gpu-burn (wilicc/gpu-burn, 2015 through current master).

Reads the device lines (``GPU 0: NAME (UUID: GPU-...)``), the progress lines
(``NN.N%  proc'd: N (G Gflop/s) - ...   errors: E  (WARNING!)- ...   temps: T C - ...``; counts
may be negative and the ``(WARNING!)``/``(DIED!)`` tags may be glued to the next ``-``), init
errors (``Couldn't init a GPU test``), ``No clients are alive!  Aborting``, and the ``Tested N
GPUs:`` summary. gpu-burn exits 0 whatever it finds, so the verdict comes only from this text:
a GPU passes only when the summary says OK, work was measured (iterations and Gflop/s > 0), its
error counter is 0 and it did not die. The last progress line holds the final values.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from nvtest.parsers._common import ParseError, guarded, numbered_lines

TOOL = "gpu-burn"
DESCRIPTION = "gpu-burn: per-GPU Gflop/s, error counts, temperatures and the OK/FAULTY summary"

__all__ = ["GpuBurnGpu", "GpuBurnResult", "detect", "parse"]


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

    @property
    def failure_reason(self) -> str | None:
        """Why the run does not pass (first reason found); None when every GPU passed."""
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


@guarded(TOOL)
def parse(text: str) -> GpuBurnResult:
    """Parse gpu-burn output into a :class:`GpuBurnResult`.

    Raises:
        ParseError: no device line, progress line or summary was found.
    """
    names: dict[int, tuple[str, str | None]] = {}
    status: dict[int, str] = {}
    last: tuple[float, list[tuple[int, float]], list[tuple[int, str | None]], list[int]] | None = (
        None
    )
    lines = 0
    tested: int | None = None
    aborted = False
    init_errors: list[str] = []
    warnings: list[str] = []
    in_summary = False
    memory: dict[int, tuple[int, int, int]] = {}
    extra: dict[str, object] = {}
    for no, line in numbered_lines(text):
        s = line.strip()
        if not s:
            continue
        if "%" in s and "proc'd" in s:
            m = _PROGRESS_RE.match(s)
            if not m:
                warnings.append(f"line {no}: unreadable progress line")
                continue
            procd = [(int(a), float(b)) for a, b in _PROCD_RE.findall(m.group(2))]
            errs = [(int(a), t or None) for a, t in _ERR_RE.findall(m.group(3))]
            temps = [int(t) for t in _TEMP_RE.findall(m.group(4) or "")]
            last = (float(m.group(1)), procd, errs, temps)
            lines += 1
            continue
        m = _TESTED_RE.match(s)
        if m:
            tested = int(m.group(1))
            in_summary = True
            continue
        if in_summary:
            m = _STATUS_RE.match(s)
            if m:
                status[int(m.group(1))] = m.group(2)
                continue
        m = _INIT_RE.match(s)
        if m:
            memory[int(m.group(1))] = (int(m.group(2)), int(m.group(3)), int(m.group(4)))
            extra["precision"] = m.group(5)
            continue
        m = _RESULTS_RE.match(s)
        if m:
            extra["result_bytes"], extra["planned_iterations"] = int(m.group(1)), int(m.group(2))
            continue
        m = _DEVICE_RE.match(s)
        if m and not in_summary:
            names[int(m.group(1))] = (m.group(2), m.group(3))
            continue
        if s.startswith("No clients are alive"):
            aborted = True
        elif (
            s.startswith("Couldn't init")
            or "CUDA_ERROR" in s
            or "CUBLAS_STATUS" in s
            or s.startswith("Error")
        ):
            init_errors.append(s)
    if last is None and not status and not names:
        raise ParseError(
            TOOL, "no gpu-burn output found", expected="'proc'd:' progress line or 'Tested N GPUs:'"
        )
    pct, procd, errs, temps = last if last else (None, [], [], [])
    n = max(
        len(procd), len(errs), len(temps), max(status, default=-1) + 1, max(names, default=-1) + 1
    )
    if procd and errs and len(procd) != len(errs):
        warnings.append(
            f"progress line lists {len(procd)} throughputs but {len(errs)} error counts"
        )
    gpus = []
    for i in range(n):
        name, uuid = names.get(i, (None, None))
        mem = memory.get(i, (None, None, None))
        gpus.append(
            GpuBurnGpu(
                index=i,
                status=status.get(i),
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
        )
    if tested is not None and tested != len(status):
        warnings.append(f"summary says {tested} GPUs but lists {len(status)}")
    return GpuBurnResult(
        gpus=tuple(gpus),
        progress_pct=pct,
        progress_lines=lines,
        tested_count=tested,
        aborted=aborted,
        init_errors=tuple(init_errors),
        warnings=tuple(warnings),
        **extra,  # type: ignore[arg-type]
    )


def detect(text: str) -> bool:
    """True when ``text`` looks like gpu-burn output."""
    head = text[:20000]
    return (
        "proc'd:" in head
        or ("Tested " in head and ("GPU 0: OK" in head or ": FAULTY" in head))
        or ("Burning for" in head)
    )
