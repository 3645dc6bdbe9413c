"""STREAM host memory bandwidth probe: compile stream.c on the node, run it, report JSON.

Usage::

    python3 stream_probe.py [--array-mib MIB] [--min-array-mib 64] [--reps 10]
                            [--threads N] [--cache-dir DIR] [--no-compile]

Arrays are sized at least 4x the last-level cache (all LLC instances of the
node summed, from /sys/devices/system/cpu/cpu*/cache/index*/), and at least
``--min-array-mib`` MiB each, unless ``--array-mib`` sets the size.  The C
kernel (stream.c beside this file) is compiled with ``cc -O3 -fopenmp`` (or
without OpenMP if that fails) into ``~/.cache/nvtest/stream-<hash>/`` where
``<hash>`` covers the source, the machine architecture and the compiler
version; a second run reuses the binary.  Without a compiler, the same four
kernels run in numpy ("implementation": "numpy-fallback").

Rates follow STREAM: GB/s = bytes / best time / 1e9 with copy and scale
counting 2 words (16 bytes) per element and add and triad 3 words (24 bytes).
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import hashlib  # noqa: E402
import platform  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

import _contract as contract  # noqa: E402
import _devices as hw  # noqa: E402
import _libraries as libs  # noqa: E402

PROBE = "stream"
SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "stream.c")
WORD_BYTES = 8
#: STREAM's words moved per element and kernel (McCalpin, stream.c ``bytes[]``).
KERNEL_WORDS = {"copy": 2, "scale": 2, "add": 3, "triad": 3}
SCALAR = 3.0
EPSILON = 1e-13
MAX_REPS = 200  # the expected values grow 15x per iteration: 15**262 overflows a double


def kernel_bytes(kernel: str, elements: int) -> int:
    """Bytes one kernel moves over arrays of ``elements`` doubles (STREAM counting)."""
    return KERNEL_WORDS[kernel] * WORD_BYTES * elements


def parse_size(text: str) -> int:
    """sysfs cache size (``"32768K"``, ``"1M"``, ``"512"``) -> bytes."""
    text = text.strip().upper()
    mult = {"K": 1024, "M": 1024**2, "G": 1024**3}.get(text[-1:], 1)
    return int(text.rstrip("KMG")) * mult


def llc_bytes(root: str = "/sys/devices/system/cpu") -> int | None:
    """Total last-level cache of the node in bytes, or None if sysfs has no cache info.

    Reads every ``cpuN/cache/indexM/{level,size,shared_cpu_list,type}``, keeps the
    highest level (data or unified caches), and sums each distinct instance once
    (instances are told apart by their ``shared_cpu_list``): on a two-socket node
    that is both sockets' L3, on a chiplet CPU every CCX's L3.
    """
    instances: dict[tuple[int, str], int] = {}
    try:
        cpus = [d for d in os.listdir(root) if re.fullmatch(r"cpu\d+", d)]
    except OSError:
        return None
    for cpu in cpus:
        cache_dir = os.path.join(root, cpu, "cache")
        try:
            indexes = [d for d in os.listdir(cache_dir) if d.startswith("index")]
        except OSError:
            continue
        for index in indexes:
            path = os.path.join(cache_dir, index)
            try:
                with open(os.path.join(path, "type")) as fh:
                    if fh.read().strip() == "Instruction":
                        continue
                with open(os.path.join(path, "level")) as fh:
                    level = int(fh.read())
                with open(os.path.join(path, "size")) as fh:
                    size = parse_size(fh.read())
                with open(os.path.join(path, "shared_cpu_list")) as fh:
                    shared = fh.read().strip()
            except (OSError, ValueError):
                continue
            instances[(level, shared)] = size
    if not instances:
        return None
    top = max(level for level, _ in instances)
    return sum(size for (level, _), size in instances.items() if level == top)


def choose_elements(llc: int | None, min_array_mib: float, array_mib: float | None) -> int:
    """Doubles per array: ``array_mib`` if given, else max(4 x LLC, ``min_array_mib``) MiB."""
    if array_mib is not None:
        nbytes = array_mib * 2**20
    else:
        nbytes = max(4 * (llc or 0), min_array_mib * 2**20)
    return max(1, int(nbytes // WORD_BYTES))


# --------------------------------------------------------------------------- the C build


def compiler_identity(cc: str) -> str:
    """``"gcc 12.2.0"`` / ``"clang 17.0.6"`` style label of the compiler command."""
    try:
        banner = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30)
        version = subprocess.run(
            [cc, "-dumpfullversion", "-dumpversion"], capture_output=True, text=True, timeout=30
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return os.path.basename(cc)
    first = banner.stdout.splitlines()[0] if banner.stdout else ""
    family = "clang" if "clang" in first.lower() else "icx" if "intel" in first.lower() else "gcc"
    return f"{family} {version.splitlines()[0] if version else first}"


def find_compiler() -> tuple[str | None, str | None]:
    """``($CC or cc, None)`` or ``(None, reason)``; honours NVTEST_PROBE_DISABLE=cc."""
    if "cc" in libs.disabled():
        return None, f"C compiler disabled by {libs.DISABLE_ENV}"
    cc = os.environ.get("CC") or "cc"
    path = shutil.which(cc)
    return (path, None) if path else (None, f"no C compiler: {cc!r} not on PATH")


def build_key(source: bytes, compiler: str) -> str:
    """Cache key: sha256 over the source, the machine architecture and the compiler label."""
    h = hashlib.sha256(source)
    h.update(platform.machine().encode())
    h.update(compiler.encode())
    return h.hexdigest()[:16]


def compile_stream(cc: str, cache_root: str) -> dict[str, Any]:
    """Build (or reuse) the stream binary; return ``{"binary", "cache_dir", "cached", ...}``.

    Tries ``cc -O3 -fopenmp`` then ``cc -O3``.  The binary is written under a
    temporary name and renamed, so nodes sharing a home directory may build at
    once.  Raises :class:`contract.ProbeError` if neither command compiles.
    """
    with open(SOURCE, "rb") as fh:
        source = fh.read()
    compiler = compiler_identity(cc)
    cache_dir = os.path.join(os.path.expanduser(cache_root), f"stream-{build_key(source, compiler)}")
    os.makedirs(cache_dir, exist_ok=True)
    attempts = [("stream-omp", ["-O3", "-fopenmp"]), ("stream-serial", ["-O3"])]
    for name, flags in attempts:
        binary = os.path.join(cache_dir, name)
        info = {"binary": binary, "cache_dir": cache_dir, "compiler": compiler, "flags": flags}
        if os.access(binary, os.X_OK):
            return {**info, "cached": True, "openmp": "-fopenmp" in flags}
    errors = []
    for name, flags in attempts:
        binary = os.path.join(cache_dir, name)
        src_copy = os.path.join(cache_dir, "stream.c")
        fd, tmp = tempfile.mkstemp(dir=cache_dir, prefix=f".{name}.")
        os.close(fd)
        cmd = [cc, *flags, "-o", tmp, SOURCE, "-lm"]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if proc.returncode == 0:
            os.chmod(tmp, 0o755)
            os.replace(tmp, binary)
            shutil.copyfile(SOURCE, src_copy)
            return {
                "binary": binary,
                "cache_dir": cache_dir,
                "compiler": compiler,
                "flags": flags,
                "command": f"{cc} {' '.join(flags)} -o {binary} stream.c -lm",
                "cached": False,
                "openmp": "-fopenmp" in flags,
            }
        os.unlink(tmp)
        errors.append(f"{' '.join(cmd)}: {proc.stderr.strip()[-500:]}")
    raise contract.ProbeError("compiling stream.c failed: " + " | ".join(errors))


# --------------------------------------------------------------------------- the table


def format_table(
    elements: int, reps: int, threads: int, times: dict[str, list[float]], check: dict[str, Any]
) -> str:
    """The stream.c-layout table for timings measured elsewhere (the numpy fallback).

    ``times[kernel]`` holds the timed iterations (warm-up excluded), seconds.
    ``check`` is :func:`validate_arrays` output.
    """
    rule = "-" * 61
    lines = [
        rule,
        "nvtest STREAM-style kernel, numpy-fallback",
        rule,
        f"Array size = {elements} (elements), Offset = 0 (elements)",
        f"Memory per array = {elements * 8 / 2**20:.1f} MiB (= {elements * 8 / 2**30:.1f} GiB).",
        f"Each kernel will be executed {reps + 1} times.",
        f"Number of Threads counted = {threads}",
        rule,
        "Function    Best Rate MB/s  Avg time     Min time     Max time",
    ]
    for kernel, ts in times.items():
        rate = 1e-6 * kernel_bytes(kernel, elements) / min(ts)
        lines.append(
            f"{kernel.capitalize() + ':':<12}{rate:14.1f}  {sum(ts) / len(ts):11.6f}"
            f"  {min(ts):11.6f}  {max(ts):11.6f}"
        )
    lines.append(rule)
    for name, err in check["errors"].items():
        lines.append(
            f"Array {name}: expected {err['expected']:.12e}, AvgRelAbsErr {err['avg_rel']:.6e}, "
            f"MaxRelAbsErr {err['max_rel']:.6e}"
        )
        if not err["ok"]:
            lines.append(f"Failed Validation on array {name}[], RelAbsErr > epsilon ({EPSILON:e})")
    if check["ok"]:
        lines.append(
            f"Solution Validates: avg and max error less than {EPSILON:e} on all three arrays"
        )
    lines.append(rule)
    return "\n".join(lines) + "\n"


_ROW = re.compile(r"^(Copy|Scale|Add|Triad):\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$")
_ERR = re.compile(
    r"^Array (\w): expected (\S+), AvgRelAbsErr (\S+), MaxRelAbsErr (\S+)\s*$"
)


def parse_table(text: str) -> dict[str, Any]:
    """Parse the stream table: kernels, array size, threads and validation.

    Returns ``{"elements": int, "threads": int, "kernels": {name: {"best_rate_mbs",
    "avg_time_s", "min_time_s", "max_time_s"}}, "validates": bool, "errors": {...}}``.
    Raises :class:`contract.ProbeError` when a kernel row or the verdict line is missing.
    """
    out: dict[str, Any] = {"kernels": {}, "errors": {}, "elements": None, "threads": None}
    for line in text.splitlines():
        if m := _ROW.match(line):
            rate, avg, tmin, tmax = (float(x) for x in m.groups()[1:])
            out["kernels"][m.group(1).lower()] = {
                "best_rate_mbs": rate,
                "avg_time_s": avg,
                "min_time_s": tmin,
                "max_time_s": tmax,
            }
        elif m := _ERR.match(line):
            out["errors"][m.group(1)] = {
                "expected": float(m.group(2)),
                "avg_rel_err": float(m.group(3)),
                "max_rel_err": float(m.group(4)),
            }
        elif m := re.match(r"Array size = (\d+)", line):
            out["elements"] = int(m.group(1))
        elif m := re.match(r"Number of Threads counted = (\d+)", line):
            out["threads"] = int(m.group(1))
    missing = [k for k in KERNEL_WORDS if k not in out["kernels"]]
    if missing:
        raise contract.ProbeError(f"stream output lacks the rows {missing}")
    if "Solution Validates" in text:
        out["validates"] = True
    elif "Failed Validation" in text:
        out["validates"] = False
    else:
        raise contract.ProbeError("stream output has neither 'Solution Validates' nor 'Failed Validation'")
    return out


# --------------------------------------------------------------------------- numpy fallback


def expected_values(reps: int, scalar: float = SCALAR) -> tuple[float, float, float]:
    """(a, b, c) after ``reps + 1`` iterations from a=1, b=2, c=0 (stream.c's checker recurrence)."""
    aj, bj, cj = 1.0, 2.0, 0.0
    for _ in range(reps + 1):
        cj = aj
        bj = scalar * cj
        cj = aj + bj
        aj = bj + scalar * cj
    return aj, bj, cj


def validate_arrays(np: Any, arrays: dict[str, Any], reps: int) -> dict[str, Any]:
    """Average/maximum relative error of each array against :func:`expected_values`."""
    errors = {}
    for name, expect in zip("abc", expected_values(reps)):  # noqa: B905 (strict= is py>=3.10; nodes may be 3.8)
        diff = np.abs(arrays[name] - expect)
        avg, mx = float(diff.mean()) / abs(expect), float(diff.max()) / abs(expect)
        ok = avg <= EPSILON and mx <= EPSILON
        errors[name] = {"expected": expect, "avg_rel": avg, "max_rel": mx, "ok": ok}
    return {"ok": all(e["ok"] for e in errors.values()), "errors": errors}


def run_numpy(np: Any, elements: int, reps: int, inject: bool) -> str:
    """The four kernels in numpy (one thread pool: numpy's ufuncs are single-threaded)."""
    a = np.full(elements, 1.0)
    b = np.full(elements, 2.0)
    c = np.zeros(elements)
    s = SCALAR
    times: dict[str, list[float]] = {k: [] for k in KERNEL_WORDS}
    kernels = {
        "copy": lambda: np.copyto(c, a),
        "scale": lambda: np.multiply(c, s, out=b),
        "add": lambda: np.add(a, b, out=c),
        # a = b + s*c: two passes in numpy, still counted as STREAM's 3 words
        "triad": lambda: np.add(np.multiply(c, s, out=a), b, out=a),
    }
    for it in range(reps + 1):
        for name, fn in kernels.items():
            t0 = time.perf_counter()
            fn()
            dt = time.perf_counter() - t0
            if it:
                times[name].append(dt)
    if inject:
        a[elements // 2] = -a[elements // 2]
    check = validate_arrays(np, {"a": a, "b": b, "c": c}, reps)
    return format_table(elements, reps, 1, times, check)


# --------------------------------------------------------------------------- probe


def build_parser() -> contract.ProbeArgumentParser:
    parser = contract.ProbeArgumentParser(prog="stream_probe.py", description=__doc__.splitlines()[0])
    parser.add_argument("--array-mib", type=float, default=None, help="MiB per array (overrides)")
    parser.add_argument("--min-array-mib", type=float, default=64.0, help="floor, MiB per array")
    parser.add_argument("--reps", type=int, default=10, help="timed repetitions (>= 10)")
    parser.add_argument("--threads", type=int, default=None, help="OMP_NUM_THREADS (default: all)")
    parser.add_argument("--cache-dir", default=os.path.join("~", ".cache", "nvtest"))
    parser.add_argument("--no-compile", action="store_true", help="use the numpy fallback")
    parser.add_argument("--timeout-s", type=float, default=1800.0)
    parser.add_argument("--inject-error", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--allow-few-reps", action="store_true", help=argparse.SUPPRESS)
    return parser


def body(args: Any, doc: dict[str, Any]) -> None:
    if not args.allow_few_reps and args.reps < 10:
        raise contract.ProbeError("usage error: --reps must be >= 10")
    if not 1 <= args.reps <= MAX_REPS:
        raise contract.ProbeError(f"usage error: --reps must be in 1..{MAX_REPS}")
    llc = llc_bytes()
    elements = choose_elements(llc, args.min_array_mib, args.array_mib)
    threads = args.threads or int(os.environ.get("OMP_NUM_THREADS", 0)) or hw.available_cpus()
    doc.update(
        implementation=None,
        llc_bytes=llc,
        array_elements=elements,
        array_mib=round(elements * WORD_BYTES / 2**20, 3),
        reps=args.reps,
        threads=threads,
        scalar=SCALAR,
    )
    cc, no_cc = (None, "--no-compile given") if args.no_compile else find_compiler()
    build: dict[str, Any] | None = None
    if cc:
        try:
            build = compile_stream(cc, args.cache_dir)
        except (contract.ProbeError, OSError, subprocess.SubprocessError) as exc:
            no_cc = str(exc)
    if build:
        env = dict(os.environ, OMP_NUM_THREADS=str(threads))
        env.setdefault("OMP_PROC_BIND", "spread")
        env.setdefault("OMP_PLACES", "cores")
        cmd = [build["binary"], "-n", str(elements), "-r", str(args.reps), "-s", str(SCALAR)]
        cmd += ["-x"] if args.inject_error else []
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=args.timeout_s)
        sys.stderr.write(proc.stderr)
        if proc.returncode != 0:
            raise contract.ProbeError(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr.strip()}")
        raw = proc.stdout
        flags = " ".join(build["flags"])
        doc["library"] = f"C ({build['compiler']}, {flags})"
        doc["implementation"] = "c-openmp" if build["openmp"] else "c-serial"
        doc["compile"] = {k: build.get(k) for k in ("cache_dir", "cached", "command", "openmp")}
        doc["command"] = " ".join(cmd)
        doc["omp_env"] = {k: env[k] for k in ("OMP_NUM_THREADS", "OMP_PROC_BIND", "OMP_PLACES")}
    else:
        np, why = libs.optional_import("numpy")
        if np is None:
            raise contract.ProbeSkip(f"{no_cc}; and {why}")
        raw = run_numpy(np, elements, args.reps, args.inject_error)
        doc["library"] = libs.library_label(np)
        doc["implementation"] = "numpy-fallback"
        doc["fallback_reason"] = no_cc
    parsed = parse_table(raw)
    doc["raw"] = raw
    if parsed["threads"]:
        doc["threads"] = parsed["threads"]
    doc["validation"] = {"ok": parsed["validates"], "errors": parsed["errors"], "epsilon": EPSILON}
    for kernel, row in parsed["kernels"].items():
        doc["results"].append(
            {
                "kernel": kernel,
                "best_rate_gbps": round(row["best_rate_mbs"] / 1e3, 4),
                "avg_time_s": row["avg_time_s"],
                "min_time_s": row["min_time_s"],
                "max_time_s": row["max_time_s"],
                "bytes_per_iter": kernel_bytes(kernel, elements),
            }
        )


if __name__ == "__main__":
    sys.exit(contract.run(PROBE, build_parser(), body))
