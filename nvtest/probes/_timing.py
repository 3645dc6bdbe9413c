"""Timing device work and summarising the sample: Timer, repetition counts, stats, percentiles, GB/s.

All times are seconds.  On a GPU a :class:`Timer` brackets the work with CUDA
events (torch or cupy) on the current device, so host launch overhead between
calls is not counted; on the CPU it uses ``time.perf_counter``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any


def stats(values: Sequence[float]) -> dict[str, float]:
    """Summary of a sample: ``{"n", "min", "median", "mean", "max"}`` (same unit as input).

    Raises:
        ValueError: ``values`` is empty.
    """
    if not values:
        raise ValueError("stats of an empty sample")
    xs = sorted(values)
    n = len(xs)
    mid = n // 2
    median = xs[mid] if n % 2 else 0.5 * (xs[mid - 1] + xs[mid])
    return {"n": n, "min": xs[0], "median": median, "mean": sum(xs) / n, "max": xs[-1]}


def gbps(nbytes: float, seconds: float) -> float:
    """Bandwidth in GB/s (10^9 bytes per second, the STREAM and nvbandwidth convention).

    ``nbytes`` moved in ``seconds``; ZeroDivisionError for ``seconds == 0``.
    """
    return nbytes / seconds / 1e9


class Timer:
    """Times a callable on a device: perf_counter on CPU, CUDA events on a GPU.

    ``backend`` is ``"cpu"``, ``"torch"`` (torch.cuda events on the current
    device) or ``"cupy"``; ``module`` the torch/cupy module for the GPU cases.
    ``time(fn)`` returns seconds for one call of ``fn`` (device work included).
    """

    def __init__(self, backend: str, module: ModuleType | None = None) -> None:
        self.backend = backend
        self.module = module

    def sync(self) -> None:
        """Wait for all queued device work (no-op on CPU)."""
        if self.backend == "torch":
            self.module.cuda.synchronize()  # type: ignore[union-attr]
        elif self.backend == "cupy":
            self.module.cuda.Device().synchronize()  # type: ignore[union-attr]

    def time(self, fn: Callable[[], Any]) -> float:
        """Seconds taken by ``fn()`` including the device work it queued."""
        if self.backend == "cpu":
            t0 = time.perf_counter()
            fn()
            return time.perf_counter() - t0
        if self.backend == "torch":
            cuda = self.module.cuda  # type: ignore[union-attr]
            start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1e3
        cp = self.module
        start, end = cp.cuda.Event(), cp.cuda.Event()  # type: ignore[union-attr]
        start.record()
        fn()
        end.record()
        end.synchronize()
        return cp.cuda.get_elapsed_time(start, end) / 1e3  # type: ignore[union-attr]

    def repeat(self, fn: Callable[[], Any], reps: int) -> list[float]:
        """``reps`` timings of ``fn`` (seconds each)."""
        return self.time_many([fn] * reps)

    def time_many(self, fns: Sequence[Callable[[], Any]]) -> list[float]:
        """Seconds of each call, run back to back.

        On a GPU every call is bracketed by its own pair of events and nothing
        waits until the last one, so the device runs the calls without host
        round trips in between (a per-call synchronise would add the launch
        latency to every call).
        """
        if self.backend == "cpu":
            return [self.time(fn) for fn in fns]
        if self.backend == "torch":
            cuda = self.module.cuda  # type: ignore[union-attr]

            def event() -> Any:
                return cuda.Event(enable_timing=True)

            def elapsed_ms(a: Any, b: Any) -> float:
                return float(a.elapsed_time(b))
        else:
            cp = self.module

            def event() -> Any:
                return cp.cuda.Event()  # type: ignore[union-attr]

            def elapsed_ms(a: Any, b: Any) -> float:
                return float(cp.cuda.get_elapsed_time(a, b))  # type: ignore[union-attr]
        marks = []
        for fn in fns:
            start, end = event(), event()
            start.record()
            fn()
            end.record()
            marks.append((start, end))
        if marks:
            marks[-1][1].synchronize()
        return [elapsed_ms(s, e) / 1e3 for s, e in marks]


def reps_for(seconds_per_rep: float, min_seconds: float, min_reps: int, max_reps: int) -> int:
    """Repetitions so the timed total is at least ``min_seconds``, within [min_reps, max_reps]."""
    if seconds_per_rep <= 0:
        return max_reps
    return max(min_reps, min(max_reps, math.ceil(min_seconds / seconds_per_rep)))



def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0 <= q <= 100) by linear interpolation between closest ranks.

    The rank of ``q`` is ``(n - 1) * q / 100`` in the sorted sample; between
    two ranks the value is interpolated (numpy's default ``linear`` method,
    Hyndman & Fan type 7).  Same unit as the input.

    Raises:
        ValueError: ``values`` is empty or ``q`` is outside [0, 100].
    """
    if not values:
        raise ValueError("percentile of an empty sample")
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile {q} outside [0, 100]")
    xs = sorted(values)
    rank = (len(xs) - 1) * q / 100.0
    lo = math.floor(rank)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (rank - lo)
