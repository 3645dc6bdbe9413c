"""GEMM throughput probe: TFLOP/s per device and dtype, with a float64 accuracy check.

Usage::

    python3 gemm_probe.py [--device auto|cpu|cuda] [--gpus 0,1] [--dtypes fp32,bf16]
                          [--size N] [--min-seconds 1.0] [--pairs 3] [--timeout-s 1800]

GPU (torch, else cupy): every selected GPU measured at the same time, one
spawned process per GPU; dtypes fp64, fp32 (tf32 off), tf32, fp16, bf16, fp8
(e4m3 through ``torch._scaled_mm``, compute capability >= 8.9); square
products of ``--size`` (default 8192).  CPU: numpy fp64/fp32 and torch
fp64/fp32/bf16; the size is chosen so one product takes >= 0.1 s unless
``--size`` is given.

TFLOP/s = 2*m*n*k / seconds / 1e12 for each timed product (CUDA events on a
GPU, perf_counter on CPU); ``tflops_median`` is the median over the timed
repetitions, which run for at least ``--min-seconds`` after a warm-up.  A/B
pairs are rotated (``--pairs``) so the same operands are not re-read from
cache.  A sample of output rows is compared with a float64 product; see
:func:`gemm_tolerance` for the error measure and bound.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import functools  # noqa: E402
import math  # noqa: E402
import random  # noqa: E402
from typing import Any  # noqa: E402

import _contract as contract  # noqa: E402
import _cuda_start as cs  # noqa: E402
import _device_pool as pool  # noqa: E402
import _devices as hw  # noqa: E402
import _gemm_backends as gemm  # noqa: E402
import _libraries as libs  # noqa: E402
import _timing as timing  # noqa: E402

PROBE = "gemm"

#: Unit roundoff u = 2**-p (round to nearest, p significand bits incl. the implicit one).
UNIT_ROUNDOFF = {
    "fp64": 2.0**-53,
    "fp32": 2.0**-24,
    "tf32": 2.0**-11,
    "fp16": 2.0**-11,
    "bf16": 2.0**-8,
    "fp8": 2.0**-4,  # e4m3
}
#: dtype -> (format the hardware rounds stored inputs to, or None; accumulator; output).
FORMATS = {
    "fp64": (None, "fp64", "fp64"),
    "fp32": (None, "fp32", "fp32"),
    "tf32": ("tf32", "fp32", "fp32"),  # fp32 storage, tensor cores read 10-bit mantissas
    "fp16": (None, "fp32", "fp16"),
    "bf16": (None, "fp32", "bf16"),
    "fp8": (None, "fp32", "bf16"),  # _scaled_mm with bf16 output
}
#: Multiplier of the probabilistic accumulation term (Higham & Mary 2019).
LAMBDA = 4.0
SAMPLE_ROWS = 8
DEFAULT_GPU_SIZE = 8192
CPU_TARGET_S = 0.1
WARMUP_S = 0.5
MAX_REPS = 20000


def gemm_tolerance(dtype: str, k: int) -> float:
    """Bound on ``max |C - R| / (|A| |B|)`` over checked elements, for inner dimension k.

    The error of each element is measured against the float64 product R of the
    exact stored inputs and normalised by ``(|A| |B|)_ij = sum_l |a_il||b_lj|``,
    the componentwise normalisation of rounding error analysis (Higham,
    *Accuracy and Stability of Numerical Algorithms*, 2nd ed., section 3.1),
    which cannot blow up by cancellation as ``|C - R| / |R|`` can.  Terms:

    * ``2 u_out``: rounding the result to the output format, plus one more
      rounding for a split-K reduction done in the output format (cuBLAS with
      reduced-precision reduction allowed, torch's default for fp16/bf16);
      both are <= u_out |C_ij| <= u_out (|A||B|)_ij.
    * ``2 u_in``: inputs the hardware rounds below their storage format (tf32
      reads fp32 operands with 10-bit mantissas): each product a*b changes by
      at most a relative 2 u_in.
    * ``LAMBDA sqrt(k) u_acc``: accumulation of k products, the probabilistic
      bound of Higham & Mary (SIAM J. Sci. Comput. 41(5), 2019) in place of
      the worst case k u_acc; with zero-mean inputs the partial sums are far
      below (|A||B|)_ij, so real errors sit well under it.

    The check is meant to catch gross corruption (NaN, garbage, wrong sign,
    dropped blocks), not last-bit deviations; burn-in's bit-identity test
    covers the latter.
    """
    hidden, acc, out = FORMATS[dtype]
    u_in = UNIT_ROUNDOFF[hidden] if hidden else 0.0
    return 2 * UNIT_ROUNDOFF[out] + 2 * u_in + LAMBDA * math.sqrt(k) * UNIT_ROUNDOFF[acc]


def check_result(max_rel_err: float, dtype: str, k: int) -> dict[str, Any]:
    """``{"max_rel_err", "tolerance", "ok"}``; a NaN/inf error is never ok."""
    tol = gemm_tolerance(dtype, k)
    ok = math.isfinite(max_rel_err) and max_rel_err <= tol
    return {"max_rel_err": max_rel_err, "tolerance": tol, "ok": ok}


def sample_rows(m: int, count: int = SAMPLE_ROWS, seed: int = 0) -> list[int]:
    """Rows of C to check: the first, the last and random ones in between (sorted, unique)."""
    rng = random.Random(seed)
    rows = {0, m - 1, *(rng.randrange(m) for _ in range(max(0, count - 2)))}
    return sorted(rows)


def round_up(x: float, multiple: int) -> int:
    """Smallest multiple of ``multiple`` >= x."""
    return int(math.ceil(x / multiple) * multiple)


def auto_size(backend: Any, dtype: str, target_s: float, max_size: int, start: int = 256) -> int:
    """Square size (multiple of 64) whose product takes >= ``target_s`` on this backend.

    Grows by the cube root of the time ratio (work is n**3), at least 1.25x a
    step, capped at ``max_size``.
    """
    mm = backend.matmul(dtype)
    n = start
    while True:
        a, b = backend.operands(dtype, n, n, n, seed=99)
        mm(a, b)  # first call: thread pools, allocation
        t = backend.timer.time(lambda a=a, b=b: mm(a, b))
        if t >= target_s or n >= max_size:
            return n
        grow = max(1.25, (1.2 * target_s / max(t, 1e-6)) ** (1 / 3))
        n = min(max_size, round_up(n * grow, 64))


def measure(
    backend: Any,
    dtype: str,
    size: int,
    min_seconds: float,
    pairs: int,
    inject_error: bool = False,
    seed: int = 1234,
) -> dict[str, Any]:
    """Time ``size``-cubed products of ``dtype`` and check a sample; one result entry.

    Warm-up: at least 3 products and WARMUP_S seconds (a quarter of
    ``min_seconds`` if less), so GPU clocks leave idle; one product if it takes
    over 1 s.  Timed: at least 5 products and at least ``min_seconds``
    (at most MAX_REPS products), cycling through ``pairs`` operand pairs.
    """
    m = n = k = size
    mm = backend.matmul(dtype)
    ops = [backend.operands(dtype, m, n, k, seed + i) for i in range(pairs)]

    def products(first: int, count: int) -> list[float]:
        """Seconds of ``count`` products, operand pairs cycled from ``first``."""
        calls = [functools.partial(mm, *ops[i % pairs]) for i in range(first, first + count)]
        return backend.timer.time_many(calls)

    warm = products(0, 1)
    warm_s = min(WARMUP_S, min_seconds / 4)
    while warm[-1] < 1.0 and (len(warm) < 3 or sum(warm) < warm_s):
        warm += products(len(warm), 1)
    reps = timing.reps_for(min(warm), min_seconds, min_reps=5, max_reps=MAX_REPS)
    times = products(0, reps)
    rates = [gemm.tflops(m, n, k, t) for t in times]
    summary = timing.stats(rates)

    a, b = ops[0]
    c = mm(a, b)
    rows = sample_rows(m)
    if inject_error:
        backend.corrupt(c, rows[len(rows) // 2], n // 3, rel=1.0)
    check = check_result(backend.rows_error(a, b, c, rows), dtype, k)
    check["rows_checked"] = len(rows)
    return {
        "dtype": dtype,
        "m": m,
        "n": n,
        "k": k,
        "tflops_median": summary["median"],
        "tflops_max": summary["max"],
        "tflops_min": summary["min"],
        "reps": reps,
        "seconds_total": sum(times),
        "pairs": pairs,
        "check": check,  # a failed check is a result (verdict fail), not a probe error
        "status": "ok",
        "reason": None,
    }


def measure_dtypes(backend: Any, device: str, payload: dict[str, Any]) -> list[dict[str, Any]]:
    """One entry per requested dtype on one backend (skips and errors kept as entries)."""
    entries = []
    label = libs.library_label(backend.torch if backend.name == "torch" else backend.np)
    ident = payload.get("identity") or {}
    for dtype in payload["dtypes"]:
        base = {"device": device, "gpu_name": ident.get("gpu_name"), "library": label,
                "dtype": dtype}
        why = backend.unsupported(dtype)
        if why:
            entries.append({**base, "status": "skip", "reason": why})
            continue
        try:
            size = payload["size"] or auto_size(
                backend, dtype, CPU_TARGET_S, payload["max_size"]
            )
            entries.append({**base, **measure(backend, dtype, size, payload["min_seconds"],
                                               payload["pairs"], payload["inject_error"])})
        except Exception as exc:  # noqa: BLE001 - one dtype failing must not hide the others
            entries.append({**base, "status": "error", "reason": f"{type(exc).__name__}: {exc}"})
        finally:
            if device.startswith("cuda") and backend.name == "torch":
                backend.torch.cuda.empty_cache()
    return entries


def gpu_worker(device: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Spawned per GPU: measure every dtype there, return ``{"device", "results"}``."""
    backend = gemm.gemm_backend(device, payload["prefer"])
    index = int(device.split(":")[1])
    payload = {**payload, "identity": hw.gpu_identity(backend.name, libs.require(backend.name), index)}
    return {"device": device, "results": measure_dtypes(backend, device, payload)}


def build_parser() -> contract.ProbeArgumentParser:
    parser = contract.base_parser("gemm_probe", __doc__.splitlines()[0])
    parser.add_argument("--dtypes", type=contract.parse_name_list, default=None,
                        help=f"subset of {','.join(gemm.GEMM_DTYPES)} (default: all the device has)")
    parser.add_argument("--size", type=int, default=None,
                        help=f"square size m=n=k (default {DEFAULT_GPU_SIZE} on GPU, auto on CPU)")
    parser.add_argument("--max-size", type=int, default=8192, help="CPU auto-size cap")
    parser.add_argument("--min-seconds", type=float, default=1.0, help="timed seconds per dtype")
    parser.add_argument("--pairs", type=int, default=3, help="A/B operand pairs rotated")
    parser.add_argument("--timeout-s", type=float, default=1800.0, help="per GPU process")
    parser.add_argument("--inject-error", action="store_true", help=argparse.SUPPRESS)
    return parser


def body(args: Any, doc: dict[str, Any]) -> None:
    bad = [d for d in args.dtypes or () if d not in gemm.GEMM_DTYPES]
    if bad:
        raise contract.ProbeError(f"usage error: unknown dtypes {bad}; known: {list(gemm.GEMM_DTYPES)}")
    device = hw.resolve_device(args.device)
    doc["device"] = device
    payload = {
        "size": args.size,
        "max_size": args.max_size,
        "min_seconds": args.min_seconds,
        "pairs": max(1, args.pairs),
        "inject_error": args.inject_error,
    }
    if device == "cuda":
        try:
            name, mod, count = hw.select_gpu_backend()
        except contract.ProbeSkip as exc:  # asked for the GPUs: never a skip, never the CPU instead
            raise contract.ProbeError(cs.cuda_failure(exc), cs.CAUSE) from None
        devices = [f"cuda:{i}" for i in hw.gpu_indices(count, args.gpus)]
        payload.update(dtypes=args.dtypes or list(gemm.GEMM_DTYPES), prefer=[name],
                       size=args.size or DEFAULT_GPU_SIZE)
        doc["library"] = libs.library_label(mod)
        for answer in pool.run_per_device(gpu_worker, devices, payload, args.timeout_s):
            doc["results"].extend(answer.get("results") or [answer])
        return
    libraries = []
    for lib in ("numpy", "torch"):
        mod, why = libs.optional_import(lib)
        if mod is None:
            doc.setdefault("libraries_missing", []).append(why)
            continue
        backend = gemm.NumpyGemm(mod) if lib == "numpy" else gemm.TorchGemm(mod, "cpu")
        default = ("fp64", "fp32") if lib == "numpy" else ("fp64", "fp32", "bf16")
        dtypes = args.dtypes or default
        libraries.append(libs.library_label(mod))
        doc["results"].extend(measure_dtypes(backend, "cpu", {**payload, "dtypes": dtypes}))
    if not libraries:
        raise contract.ProbeSkip("no CPU GEMM library: " + "; ".join(doc["libraries_missing"]))
    doc["library"] = ", ".join(libraries)
    doc["threads"] = hw.available_cpus()


if __name__ == "__main__":
    sys.exit(contract.run(PROBE, build_parser(), body))
