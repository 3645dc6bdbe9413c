"""Measurement fidelity of the STREAM and GEMM probes against independent numpy references.

Runs, in the same process tree and interleaved round by round (so machine
load drifts hit both sides alike):

* the STREAM probe (C kernel, all threads and one thread, and its numpy
  fallback) against a separately written numpy copy (``np.copyto``: one pass,
  2 words/element) and triad (``a = b + s*c``: ``np.multiply`` into a scratch
  array then ``np.add``, counted as STREAM's 3 words/element although numpy
  makes two passes), over arrays of the probe's size, best of N;
* the same STREAM probe against a separately written C copy and triad loop
  (compiled here with ``cc -O3 -fopenmp``, same array size and thread count);
* the GEMM probe restricted to numpy (fp64, fp32) against a direct
  ``np.matmul`` timing at the size the probe chose, median TFLOP/s.

Each metric keeps the best of ``--rounds`` rounds on each side; the table
gives probe / reference.  numpy is single-threaded for elementwise ufuncs, so
the all-threads C STREAM row is expected above 1 on a multi-core node and the
one-thread row near 1 or above (one pass of C beats numpy's two for triad).

Usage: ``python bench/fidelity_bench.py [--rounds 3] [--json]``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

PROBES = Path(__file__).resolve().parents[1] / "nvtest" / "probes"
SCALAR = 3.0


def run_probe(script: str, *args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run a probe as a node would and return its JSON document (status must be ok)."""
    proc = subprocess.run(
        [sys.executable, str(PROBES / script), *args],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, **(env or {})},
    )
    doc = json.loads(proc.stdout)
    if doc["status"] != "ok":
        raise RuntimeError(f"{script} {args}: {doc['status']}: {doc['reason']}")
    return doc


def stream_rate(doc: dict[str, Any], kernel: str) -> float:
    """Best GB/s of one kernel in a STREAM probe document."""
    return next(r["best_rate_gbps"] for r in doc["results"] if r["kernel"] == kernel)


def numpy_stream_reference(elements: int, reps: int) -> dict[str, float]:
    """Best GB/s (1e9 B/s) of numpy copy (2 words) and triad (3 words) over ``elements`` doubles."""
    a = np.full(elements, 1.0)
    b = np.full(elements, 2.0)
    c = np.full(elements, 0.5)
    tmp = np.empty(elements)
    best = {"copy": float("inf"), "triad": float("inf")}
    for _ in range(reps + 1):  # first pass warms pages and caches
        t0 = time.perf_counter()
        np.copyto(a, c)
        t1 = time.perf_counter()
        np.multiply(c, SCALAR, out=tmp)
        np.add(b, tmp, out=a)
        t2 = time.perf_counter()
        best["copy"] = min(best["copy"], t1 - t0)
        best["triad"] = min(best["triad"], t2 - t1)
    return {
        "copy": 2 * 8 * elements / best["copy"] / 1e9,
        "triad": 3 * 8 * elements / best["triad"] / 1e9,
    }


C_REFERENCE = r"""
#include <stdio.h>
#include <stdlib.h>
#include <omp.h>
/* A plain copy and triad loop, written apart from nvtest's stream.c, for comparison. */
int main(int argc, char **argv) {
    long n = atol(argv[1]); int reps = atoi(argv[2]);
    double *a = malloc(n * sizeof(double)), *b = malloc(n * sizeof(double)), *c = malloc(n * sizeof(double));
    #pragma omp parallel for
    for (long i = 0; i < n; i++) { a[i] = 1.0; b[i] = 2.0; c[i] = 0.5; }
    double best_copy = 1e30, best_triad = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = omp_get_wtime();
        #pragma omp parallel for
        for (long i = 0; i < n; i++) c[i] = a[i];
        double t1 = omp_get_wtime();
        #pragma omp parallel for
        for (long i = 0; i < n; i++) a[i] = b[i] + 3.0 * c[i];
        double t2 = omp_get_wtime();
        if (t1 - t0 < best_copy) best_copy = t1 - t0;
        if (t2 - t1 < best_triad) best_triad = t2 - t1;
    }
    printf("%.6f %.6f %.3f\n", 16.0 * n / best_copy / 1e9, 24.0 * n / best_triad / 1e9, a[n / 2]);
    return 0;
}
"""


def c_stream_reference(elements: int, threads: int, reps: int = 10) -> dict[str, float]:
    """Best GB/s of a separately written C copy (2 words) and triad (3 words) loop,
    compiled here with ``cc -O3 -fopenmp`` and run on ``threads`` OpenMP threads."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        src, exe = Path(tmp) / "ref.c", Path(tmp) / "ref"
        src.write_text(C_REFERENCE)
        subprocess.run(["cc", "-O3", "-fopenmp", "-o", str(exe), str(src)], check=True)
        out = subprocess.run(
            [str(exe), str(elements), str(reps)],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "OMP_NUM_THREADS": str(threads)},
        ).stdout.split()
    return {"copy": float(out[0]), "triad": float(out[1])}


def numpy_gemm_reference(dtype: str, size: int, min_seconds: float) -> float:
    """Median TFLOP/s of ``np.matmul`` on random size x size operands, >= ``min_seconds`` timed."""
    dt = np.float64 if dtype == "fp64" else np.float32
    rng = np.random.default_rng(7)
    a = rng.random((size, size), dtype=dt) * 2 - 1
    b = rng.random((size, size), dtype=dt) * 2 - 1
    np.matmul(a, b)
    times: list[float] = []
    while sum(times) < min_seconds or len(times) < 5:
        t0 = time.perf_counter()
        np.matmul(a, b)
        times.append(time.perf_counter() - t0)
    return 2 * size**3 / float(np.median(times)) / 1e12


def bench(rounds: int) -> list[dict[str, Any]]:
    """Best-of-rounds probe and reference values per metric."""
    best: dict[str, dict[str, float]] = {}
    sizes: dict[str, int] = {}

    def keep(metric: str, side: str, value: float) -> None:
        slot = best.setdefault(metric, {})
        slot[side] = max(slot.get(side, 0.0), value)

    for _ in range(rounds):
        st_all = run_probe("stream_probe.py")
        st_one = run_probe("stream_probe.py", "--threads", "1")
        st_np = run_probe("stream_probe.py", env={"NVTEST_PROBE_DISABLE": "cc"})
        ref = numpy_stream_reference(st_all["array_elements"], reps=10)
        threads = st_all["threads"]
        c_all = c_stream_reference(st_all["array_elements"], threads)
        c_one = c_stream_reference(st_all["array_elements"], 1)
        for kernel in ("copy", "triad"):
            keep(f"STREAM {kernel} GB/s, C {threads} threads vs C loop", "probe", stream_rate(st_all, kernel))
            keep(f"STREAM {kernel} GB/s, C {threads} threads vs C loop", "ref", c_all[kernel])
            keep(f"STREAM {kernel} GB/s, C 1 thread vs C loop", "probe", stream_rate(st_one, kernel))
            keep(f"STREAM {kernel} GB/s, C 1 thread vs C loop", "ref", c_one[kernel])
            keep(f"STREAM {kernel} GB/s, C 1 thread vs numpy", "probe", stream_rate(st_one, kernel))
            keep(f"STREAM {kernel} GB/s, C 1 thread vs numpy", "ref", ref[kernel])
            keep(f"STREAM {kernel} GB/s, numpy fallback", "probe", stream_rate(st_np, kernel))
            keep(f"STREAM {kernel} GB/s, numpy fallback", "ref", ref[kernel])
        for dtype in ("fp64", "fp32"):
            # round 1 lets the probe size the product; later rounds reuse that size
            size = ["--size", str(sizes[dtype])] if dtype in sizes else []
            gemm = run_probe(
                "gemm_probe.py",
                "--device",
                "cpu",
                "--dtypes",
                dtype,
                *size,
                env={"NVTEST_PROBE_DISABLE": "torch"},
            )
            (r,) = gemm["results"]
            sizes[dtype] = r["m"]
            metric = f"GEMM {dtype} TFLOP/s, numpy n={r['m']}"
            keep(metric, "probe", r["tflops_median"])
            keep(metric, "ref", numpy_gemm_reference(dtype, r["m"], 1.0))
    rows = []
    for metric, sides in best.items():
        if "probe" in sides and "ref" in sides:
            rows.append(
                {
                    "metric": metric,
                    "probe": sides["probe"],
                    "reference": sides["ref"],
                    "ratio": sides["probe"] / sides["ref"],
                }
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if "BLAS" in k or k.startswith(("OMP_", "MKL_"))}
    load0 = " ".join(f"{x:.1f}" for x in os.getloadavg())
    rows = bench(args.rounds)
    if args.json:
        print(json.dumps({"rows": rows, "env": env, "cpus": os.cpu_count()}, indent=2))
        return
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"fidelity bench: {args.rounds} rounds, best of each side; cpus={os.cpu_count()}; "
        f"load average before/after: {load0} / {load}; BLAS/OpenMP env: {env or 'none set'}"
    )
    print(f"| {'metric':<50} | {'probe':>10} | {'reference':>10} | {'probe/ref':>9} |")
    print(f"|{'-' * 52}|{'-' * 12}|{'-' * 12}|{'-' * 11}|")
    for r in rows:
        fmt = ".4f" if "TFLOP" in r["metric"] else ".2f"
        print(f"| {r['metric']:<50} | {r['probe']:>10{fmt}} | {r['reference']:>10{fmt}} | {r['ratio']:>9.3f} |")


if __name__ == "__main__":
    main()
