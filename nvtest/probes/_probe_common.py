"""Shared code of the node-side probes: JSON document, driver, imports, timing, devices.

The probes in this directory are shipped to a node as one flat directory and run
with the node's own interpreter (``python3 DIR/gemm_probe.py ARGS``).  Each probe
puts its own directory first on ``sys.path`` and imports this module as
``_probe_common``.  Nothing here imports nvtest, and numpy/torch/cupy/pynvml are
only imported lazily through :func:`optional_import`.

Contract (see docs/probes.md): a probe prints exactly one JSON document on
stdout::

    {"probe": NAME, "probe_version": 1, "status": "ok" | "skip" | "error",
     "reason": str | None, "host": str, "library": str | None,
     "results": [ {...}, ... ], ...probe specific keys...}

and exits 0 for ``ok`` and ``skip``, 1 for ``error``.  Anything else the probe or
a library writes to stdout (including C libraries writing to fd 1 and child
processes) is redirected to stderr while the probe runs, so stdout carries the
JSON document alone.

Environment switches honoured by every probe:

``NVTEST_PROBE_DISABLE=torch,cupy,...``
    behave as if these optional components were absent (``numpy``, ``torch``,
    ``cupy``, ``pynvml``, ``cc`` for the C compiler, ``nvbandwidth``); used by
    tests and by operators to force a fallback path.
``NVTEST_PROBE_FORCE_ERROR=1`` (or a comma list of probe names)
    raise inside the probe body after argument parsing: the error path (status
    ``error``, exit 1, JSON still printed) can be exercised on any machine.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import importlib
import json
import math
import os
import queue as _queue
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from types import ModuleType
from typing import Any

PROBE_VERSION = 1
DISABLE_ENV = "NVTEST_PROBE_DISABLE"
FORCE_ERROR_ENV = "NVTEST_PROBE_FORCE_ERROR"

EXIT_OK = 0
EXIT_ERROR = 1


class ProbeSkip(Exception):
    """The probe does not apply on this node (no GPU, no library); the message is the reason."""


class ProbeError(Exception):
    """The probe applies but could not measure; the message is the reason."""


class ProbeTerminated(BaseException):
    """SIGTERM arrived (the controller's timeout); a BaseException so that no
    ``except Exception`` in a probe or library swallows it."""


# --------------------------------------------------------------------------- imports


def disabled() -> set[str]:
    """Names listed in ``$NVTEST_PROBE_DISABLE`` (comma or space separated, lower case)."""
    raw = os.environ.get(DISABLE_ENV, "")
    return {p.strip().lower() for p in raw.replace(" ", ",").split(",") if p.strip()}


def optional_import(name: str) -> tuple[ModuleType | None, str | None]:
    """Import an optional module: ``(module, None)`` or ``(None, reason it is absent)``.

    Any exception raised by the import (not only ImportError: a broken CUDA
    install can raise OSError or RuntimeError) counts as absent, with its text.
    """
    top = name.split(".")[0].lower()
    if top in disabled():
        return None, f"{top} disabled by {DISABLE_ENV}"
    try:
        return importlib.import_module(name), None
    except Exception as exc:  # noqa: BLE001 - any failure means "not usable here"
        return None, f"{name} not importable: {type(exc).__name__}: {exc}"


def require(name: str) -> ModuleType:
    """Import a module the probe cannot run without, or raise :class:`ProbeSkip`."""
    mod, reason = optional_import(name)
    if mod is None:
        raise ProbeSkip(reason)
    return mod


def library_label(mod: ModuleType | None) -> str | None:
    """``"torch 2.13.0"`` style label of an imported module (None for None)."""
    if mod is None:
        return None
    version = getattr(mod, "__version__", "unknown")
    return f"{mod.__name__} {version}"


# --------------------------------------------------------------------------- document


def hostname() -> str:
    """Short host name as the node reports it (``socket.gethostname()``)."""
    return socket.gethostname()


def new_document(probe: str) -> dict[str, Any]:
    """The common skeleton of a probe's JSON document (status None until :func:`run` sets it)."""
    return {
        "probe": probe,
        "probe_version": PROBE_VERSION,
        "status": None,  # None until set: run() derives it from the results
        "reason": None,
        "host": hostname(),
        "library": None,
        "results": [],
        "argv": list(sys.argv[1:]),
        "python": sys.version.split()[0],
        "started_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),  # noqa: UP017 (py<3.11 nodes)
        "duration_s": None,
    }


def overall_status(results: Sequence[dict[str, Any]]) -> tuple[str, str | None]:
    """Fold per-entry statuses into the document's ``(status, reason)``.

    Entries without a ``status`` key count as ``ok``.  Any ``error`` entry makes
    the document ``error`` (reason: the first error's reason, prefixed with its
    device); no entry or only ``skip`` entries make it ``skip``; else ``ok``.
    """
    errors = [r for r in results if r.get("status") == "error"]
    if errors:
        first = errors[0]
        where = first.get("device")
        reason = str(first.get("reason"))
        return "error", f"{where}: {reason}" if where else reason
    if not results or all(r.get("status") == "skip" for r in results):
        reasons = sorted({str(r.get("reason")) for r in results if r.get("reason")})
        return "skip", "; ".join(reasons) or "nothing measured"
    return "ok", None


def json_default(obj: Any) -> Any:
    """Make numpy scalars and other odd values JSON-serialisable."""
    for attr in ("item", "tolist"):
        if hasattr(obj, attr):
            return getattr(obj, attr)()
    return str(obj)


def sanitize(obj: Any) -> Any:
    """Replace NaN/inf floats by None recursively (strict JSON has no NaN)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: sanitize(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [sanitize(v) for v in obj]
    return obj


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[Callable[[str], None]]:
    """Send fd 1 to fd 2 for the duration; yield a writer for the real stdout.

    Works at file-descriptor level so that output of C libraries and of child
    processes started meanwhile cannot end up between the probe's JSON.
    """
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    old_stdout = sys.stdout
    sys.stdout = sys.stderr
    real = os.fdopen(saved, "w", closefd=False)

    def write(text: str) -> None:
        real.write(text)
        real.flush()

    try:
        yield write
    finally:
        sys.stdout.flush()
        sys.stdout = old_stdout
        os.dup2(saved, 1)
        real.close()
        os.close(saved)


class ProbeArgumentParser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors become a :class:`ProbeError` (JSON, not exit 2)."""

    def error(self, message: str) -> Any:  # type: ignore[override]
        raise ProbeError(f"usage error: {message}")

    def exit(self, status: int = 0, message: str | None = None) -> Any:  # type: ignore[override]
        if status:
            raise ProbeError(f"usage error: {message or 'exit ' + str(status)}")
        raise SystemExit(status)  # --help: usage on stderr (stdout is redirected), exit 0


def _raise_on_sigterm(signum: int, _frame: Any) -> None:
    raise ProbeTerminated(f"terminated by signal {signum}")


def run(
    probe: str,
    parser: argparse.ArgumentParser,
    body: Callable[[argparse.Namespace, dict[str, Any]], None],
    argv: Sequence[str] | None = None,
    emit: Callable[[argparse.Namespace | None], bool] | None = None,
) -> int:
    """Run a probe body and print its JSON document; return the exit code.

    ``body(args, doc)`` fills ``doc`` (``library``, ``results``, extra keys) and
    may raise :class:`ProbeSkip` or any exception (status ``error``).  When
    ``doc["status"]`` is left None it is derived from the results with
    :func:`overall_status`.  ``emit(args)`` returning False prints the document
    on stderr instead of stdout (non-zero DDP ranks).
    """
    doc = new_document(probe)
    t0 = time.perf_counter()
    args: argparse.Namespace | None = None
    with contextlib.suppress(ValueError):  # not the main thread
        signal.signal(signal.SIGTERM, _raise_on_sigterm)
    with stdout_to_stderr() as write_stdout:
        try:
            args = parser.parse_args(argv)
            forced = os.environ.get(FORCE_ERROR_ENV, "")
            if forced and (forced in ("1", "all") or probe in forced.split(",")):
                raise ProbeError(f"forced failure ({FORCE_ERROR_ENV}={forced})")
            body(args, doc)
            if doc["status"] is None:
                doc["status"], doc["reason"] = overall_status(doc["results"])
        except ProbeSkip as exc:
            doc["status"], doc["reason"] = "skip", str(exc)
        except SystemExit as exc:  # --help
            if exc.code in (0, None):
                return EXIT_OK
            doc["status"], doc["reason"] = "error", f"exit {exc.code}"
        except BaseException as exc:  # noqa: BLE001 - the contract: JSON, never a traceback
            traceback.print_exc(file=sys.stderr)
            doc["status"] = "error"
            doc["reason"] = f"{type(exc).__name__}: {exc}".strip()
        doc["duration_s"] = round(time.perf_counter() - t0, 3)
        text = json.dumps(sanitize(doc), default=json_default, sort_keys=False)
        if emit is None or emit(args):
            write_stdout(text + "\n")
        else:
            print(text, file=sys.stderr)
    return EXIT_ERROR if doc["status"] == "error" else EXIT_OK


def base_parser(probe: str, description: str) -> ProbeArgumentParser:
    """Parser with the options every device probe shares (``--device``, ``--gpus``)."""
    parser = ProbeArgumentParser(prog=f"{probe}.py", description=description)
    parser.add_argument(
        "--device",
        choices=("auto", "cpu", "cuda"),
        default="auto",
        help="where to measure: cuda GPUs, the host CPU, or auto (GPUs if any)",
    )
    parser.add_argument(
        "--gpus",
        type=parse_index_list,
        default=None,
        help="comma list of CUDA device indices to use (default: all visible)",
    )
    return parser


def parse_index_list(text: str) -> list[int]:
    """``"0,2,3"`` -> ``[0, 2, 3]`` (argparse ``type=``)."""
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma list of integers: {text!r}") from None


def parse_name_list(text: str) -> list[str]:
    """``"fp32, bf16"`` -> ``["fp32", "bf16"]`` (argparse ``type=``)."""
    return [x.strip().lower() for x in text.split(",") if x.strip()]


# --------------------------------------------------------------------------- statistics


def stats(values: Sequence[float]) -> dict[str, float]:
    """Summary of a sample: ``{"n", "min", "median", "mean", "max"}`` (same unit as input)."""
    if not values:
        raise ValueError("stats of an empty sample")
    xs = sorted(values)
    n = len(xs)
    mid = n // 2
    median = xs[mid] if n % 2 else 0.5 * (xs[mid - 1] + xs[mid])
    return {"n": n, "min": xs[0], "median": median, "mean": sum(xs) / n, "max": xs[-1]}


def gbps(nbytes: float, seconds: float) -> float:
    """Bandwidth in GB/s, 10^9 bytes per second (STREAM and nvbandwidth convention)."""
    return nbytes / seconds / 1e9


def gemm_flops(m: int, n: int, k: int) -> int:
    """Floating point operations of C(m x n) = A(m x k) @ B(k x n): 2*m*n*k (one mul + one add)."""
    return 2 * m * n * k


def tflops(m: int, n: int, k: int, seconds: float) -> float:
    """TFLOP/s of one m x n x k product that took ``seconds``: 2*m*n*k / s / 1e12."""
    return gemm_flops(m, n, k) / seconds / 1e12


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


# --------------------------------------------------------------------------- devices


def select_gpu_backend(prefer: Sequence[str] = ("torch", "cupy")) -> tuple[str, ModuleType, int]:
    """First usable GPU library: ``(name, module, device count)``; :class:`ProbeSkip` if none.

    The skip reason lists why each library was unusable, e.g. ``"no CUDA
    device: torch.cuda.is_available() is False; cupy not importable: ..."``.
    """
    reasons = []
    for name in prefer:
        mod, why = optional_import(name)
        if mod is None:
            reasons.append(why)
            continue
        try:
            if name == "torch":
                if not mod.cuda.is_available():
                    reasons.append("no CUDA device: torch.cuda.is_available() is False")
                    continue
                return name, mod, int(mod.cuda.device_count())
            count = int(mod.cuda.runtime.getDeviceCount())
            if count:
                return name, mod, count
            reasons.append("no CUDA device: cupy getDeviceCount() is 0")
        except Exception as exc:  # noqa: BLE001 - e.g. cudaErrorNoDevice, driver mismatch
            reasons.append(f"no CUDA device: {name}: {type(exc).__name__}: {exc}")
    raise ProbeSkip("; ".join(str(r) for r in reasons))


def resolve_device(requested: str) -> str:
    """``auto`` -> ``"cuda"`` when a GPU library sees a device, else ``"cpu"``."""
    if requested != "auto":
        return requested
    try:
        select_gpu_backend()
    except ProbeSkip:
        return "cpu"
    return "cuda"


def gpu_indices(count: int, wanted: Sequence[int] | None) -> list[int]:
    """Visible device indices to use; an index outside ``range(count)`` is a ProbeError."""
    if wanted is None:
        return list(range(count))
    bad = [i for i in wanted if not 0 <= i < count]
    if bad:
        raise ProbeError(f"--gpus {bad} outside the {count} visible CUDA devices")
    return list(wanted)


def gpu_identity(backend: str, module: ModuleType, index: int) -> dict[str, Any]:
    """Name, PCI bus id and NUMA node of GPU ``index`` (fields None where unknown)."""
    name = bus = None
    with contextlib.suppress(Exception):
        if backend == "torch":
            props = module.cuda.get_device_properties(index)
            name = props.name
            if hasattr(props, "pci_bus_id"):
                bus = f"{props.pci_domain_id:08x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
        else:
            props = module.cuda.runtime.getDeviceProperties(index)
            name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
            bus = f"{props['pciDomainID']:08x}:{props['pciBusID']:02x}:{props['pciDeviceID']:02x}.0"
    return {"gpu_name": name, "pci_bus_id": bus, "numa_node": pci_numa_node(bus)}


def _pci_sysfs_dir(bus_id: str, root: str) -> str:
    """sysfs path of a PCI function; accepts 8- or 4-digit domains (nvidia-smi prints 8)."""
    bus_id = bus_id.lower()
    if len(bus_id.split(":")[0]) == 8:
        bus_id = bus_id[4:]
    return os.path.join(root, bus_id)


def pci_numa_node(bus_id: str | None, root: str = "/sys/bus/pci/devices") -> int | None:
    """NUMA node of a PCI device from sysfs ``numa_node`` (None if unknown or -1)."""
    if not bus_id:
        return None
    try:
        with open(os.path.join(_pci_sysfs_dir(bus_id, root), "numa_node")) as fh:
            node = int(fh.read().strip())
    except (OSError, ValueError):
        return None
    return node if node >= 0 else None


def parse_cpu_list(text: str) -> list[int]:
    """Kernel cpu list syntax ``"0-3,8,10-11"`` -> ``[0, 1, 2, 3, 8, 10, 11]``."""
    cpus: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        cpus.extend(range(int(lo), int(hi or lo) + 1))
    return cpus


def pci_local_cpus(bus_id: str | None, root: str = "/sys/bus/pci/devices") -> list[int] | None:
    """CPUs local to a PCI device (sysfs ``local_cpulist``), None if unreadable."""
    if not bus_id:
        return None
    try:
        with open(os.path.join(_pci_sysfs_dir(bus_id, root), "local_cpulist")) as fh:
            return parse_cpu_list(fh.read()) or None
    except (OSError, ValueError):
        return None


def available_cpus() -> int:
    """CPUs this process may run on (affinity mask, so taskset/cgroups are honoured)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _device_worker(
    fn: Callable[[str, Any], dict[str, Any]], device: str, payload: Any, queue: Any
) -> None:
    """Child-process entry of :func:`run_per_device`: never raises, always answers."""
    try:
        result = fn(device, payload)
    except ProbeSkip as exc:
        result = {"device": device, "status": "skip", "reason": str(exc)}
    except BaseException as exc:  # noqa: BLE001 - report CUDA errors as data
        traceback.print_exc(file=sys.stderr)
        result = {"device": device, "status": "error", "reason": f"{type(exc).__name__}: {exc}"}
    queue.put((device, result))


def run_per_device(
    fn: Callable[[str, Any], dict[str, Any]],
    devices: Sequence[str],
    payload: Any,
    timeout_s: float,
    context: Any = None,
) -> list[dict[str, Any]]:
    """Run ``fn(device, payload)`` in one spawned process per device, all at once.

    ``devices`` are strings like ``"cuda:0"`` or ``"cpu"``; ``fn`` must be a
    module-level function of the probe script (picklable under spawn).  Returns
    one dict per device, in the order given; a process that raises, dies or
    outlives ``timeout_s`` yields ``{"device", "status": "error", "reason"}``.
    ``context``: a multiprocessing spawn context (default the stdlib's; the
    training probe passes torch.multiprocessing's).
    """
    import multiprocessing as mp

    ctx = context or mp.get_context("spawn")
    queue = ctx.Queue()
    procs = {
        dev: ctx.Process(target=_device_worker, args=(fn, dev, payload, queue), daemon=True)
        for dev in devices
    }
    answers: dict[str, dict[str, Any]] = {}
    try:
        for proc in procs.values():
            proc.start()
        deadline = time.monotonic() + timeout_s
        while len(answers) < len(procs) and time.monotonic() < deadline:
            try:
                dev, result = queue.get(timeout=0.2)
                answers[dev] = result
            except _queue.Empty:
                if all(not p.is_alive() for d, p in procs.items() if d not in answers):
                    with contextlib.suppress(_queue.Empty):  # answers still in the pipe
                        while len(answers) < len(procs):
                            dev, result = queue.get(timeout=0.5)
                            answers[dev] = result
                    break
    finally:  # also on SIGTERM/KeyboardInterrupt: leave no worker behind
        for dev, proc in procs.items():
            if proc.is_alive() and dev not in answers:
                proc.terminate()
    for dev, proc in procs.items():
        proc.join(timeout=10)
        if dev not in answers:
            why = (
                f"no answer within {timeout_s:.0f} s (terminated)"
                if proc.exitcode in (None, -signal.SIGTERM)
                else f"worker process died with exit code {proc.exitcode}"
            )
            answers[dev] = {"device": dev, "status": "error", "reason": why}
    return [answers[d] for d in devices]


# --------------------------------------------------------------------------- GEMM backends
#
# One small class per array library with the same four methods, used by the
# GEMM probe (throughput + accuracy check) and the burn-in probe (sustained
# load + bit-identical output hash).  Inputs are uniform in [-1, 1) (never
# zeros), generated directly in the storage dtype, so the float64 reference
# sees exactly the values the GEMM consumed (tf32 is the exception: stored as
# fp32, rounded by the tensor cores).

#: dtype name -> storage format of the inputs/outputs on each library.
GEMM_DTYPES = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8")


class NumpyGemm:
    """GEMM on the host CPU with numpy (BLAS): dtypes fp64, fp32."""

    name = "numpy"
    dtypes = ("fp64", "fp32")

    def __init__(self, np: ModuleType) -> None:
        self.np = np
        self.timer = Timer("cpu")

    def unsupported(self, dtype: str) -> str | None:
        """Why ``dtype`` cannot run here, or None."""
        return None if dtype in self.dtypes else f"{dtype} not available with numpy"

    def operands(self, dtype: str, m: int, n: int, k: int, seed: int) -> tuple[Any, Any]:
        """Random A (m x k) and B (k x n) in [-1, 1)."""
        dt = self.np.float64 if dtype == "fp64" else self.np.float32
        rng = self.np.random.default_rng(seed)
        a = rng.random((m, k), dtype=dt) * 2 - 1
        b = rng.random((k, n), dtype=dt) * 2 - 1
        return a, b

    def matmul(self, dtype: str) -> Callable[[Any, Any], Any]:
        """The product function for ``dtype``: ``f(A, B) -> C``."""
        return self.np.matmul

    def rows_error(self, a: Any, b: Any, c: Any, rows: Sequence[int]) -> float:
        """max over C[rows, :] of |C - R| / (|A||B|), R the float64 product."""
        np = self.np
        a64, b64 = a[list(rows)].astype(np.float64), b.astype(np.float64)
        ref, scale = a64 @ b64, np.abs(a64) @ np.abs(b64)
        err = np.abs(c[list(rows)].astype(np.float64) - ref) / scale
        return float(err.max()) if np.isfinite(err).all() else float("nan")

    def digest(self, c: Any) -> str:
        """blake2b-128 hex digest of C's bytes (bit-identity check)."""
        import hashlib

        return hashlib.blake2b(self.np.ascontiguousarray(c).tobytes(), digest_size=16).hexdigest()

    def corrupt(self, c: Any, row: int, col: int, rel: float) -> None:
        """Add ``rel`` times the row's largest magnitude to C[row, col] (tests only)."""
        c[row, col] += rel * float(abs(c[row]).max())


class TorchGemm:
    """GEMM with torch on ``device`` (``"cpu"`` or ``"cuda:N"``).

    dtypes on CUDA: fp64, fp32 (tf32 off), tf32, fp16, bf16, fp8 (e4m3 via
    ``torch._scaled_mm``, bf16 output, needs compute capability >= 8.9); on
    CPU: fp64, fp32, bf16 where a tiny bf16 product works.
    """

    name = "torch"

    def __init__(self, torch: ModuleType, device: str) -> None:
        self.torch = torch
        self.device = device
        self.cuda = device.startswith("cuda")
        self.timer = Timer("torch" if self.cuda else "cpu", torch)
        if self.cuda:
            torch.cuda.set_device(torch.device(device))

    def unsupported(self, dtype: str) -> str | None:
        """Why ``dtype`` cannot run on this device, or None."""
        torch = self.torch
        if dtype not in GEMM_DTYPES:
            return f"unknown dtype {dtype}"
        if not self.cuda:
            if dtype in ("tf32", "fp16", "fp8"):
                return f"{dtype} GEMM is not measured on CPU"
            if dtype == "bf16":
                try:
                    x = torch.ones(4, 4, dtype=torch.bfloat16)
                    torch.matmul(x, x)
                except Exception as exc:  # noqa: BLE001
                    return f"bf16 matmul unsupported by torch on this CPU: {exc}"
            return None
        if dtype == "fp8":
            cap = torch.cuda.get_device_capability(torch.device(self.device))
            if tuple(cap) < (8, 9):
                return f"fp8 needs compute capability >= 8.9 (this GPU: {cap[0]}.{cap[1]})"
            if not (hasattr(torch, "float8_e4m3fn") and hasattr(torch, "_scaled_mm")):
                return f"fp8 needs torch.float8_e4m3fn and torch._scaled_mm (torch {torch.__version__})"
        return None

    def _storage(self, dtype: str) -> Any:
        t = self.torch
        return {"fp64": t.float64, "fp32": t.float32, "tf32": t.float32, "fp16": t.float16,
                "bf16": t.bfloat16}.get(dtype, t.float32)

    def operands(self, dtype: str, m: int, n: int, k: int, seed: int) -> tuple[Any, Any]:
        """Random A (m x k) and B (k x n) in [-1, 1); fp8 B is column-major for _scaled_mm."""
        torch = self.torch
        gen = torch.Generator(device=self.device).manual_seed(seed)
        gen_dt = torch.float64 if dtype == "fp64" else torch.float32

        def uniform(*shape: int) -> Any:
            return torch.rand(*shape, generator=gen, device=self.device, dtype=gen_dt) * 2 - 1

        if dtype == "fp8":
            a = uniform(m, k).to(torch.float8_e4m3fn)
            b = uniform(n, k).to(torch.float8_e4m3fn).t()  # (k x n), column-major
            return a, b
        st = self._storage(dtype)
        return uniform(m, k).to(st), uniform(k, n).to(st)

    def matmul(self, dtype: str) -> Callable[[Any, Any], Any]:
        """The product function for ``dtype``; sets the tf32 switch as the dtype needs."""
        torch = self.torch
        if self.cuda:
            torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
        if dtype == "fp8":
            one = torch.ones((), device=self.device, dtype=torch.float32)

            def fp8_mm(a: Any, b: Any) -> Any:
                out = torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
                return out[0] if isinstance(out, tuple) else out  # older torch: (out, amax)

            return fp8_mm
        return torch.matmul

    def rows_error(self, a: Any, b: Any, c: Any, rows: Sequence[int]) -> float:
        """max over C[rows, :] of |C - R| / (|A||B|), R the float64 product (on the device)."""
        torch = self.torch

        def to64(t: Any) -> Any:  # exact: fp8/fp16/bf16 -> fp32 -> fp64 (fp8 has no direct path)
            return t if t.dtype == torch.float64 else t.float().double()

        # row views work for every dtype, fp8 included (index_select may not)
        a64 = torch.stack([to64(a[r]) for r in rows])
        b64 = to64(b)
        ref, scale = a64 @ b64, a64.abs() @ b64.abs()
        err = (torch.stack([to64(c[r]) for r in rows]) - ref).abs() / scale
        if not bool(torch.isfinite(err).all()):
            return float("nan")
        return float(err.max())

    def digest(self, c: Any) -> str:
        """blake2b-128 hex digest of C's bytes, copied to the host (no numpy needed)."""
        import ctypes
        import hashlib

        host = c.detach().contiguous().cpu()
        raw = ctypes.string_at(host.data_ptr(), host.numel() * host.element_size())
        return hashlib.blake2b(raw, digest_size=16).hexdigest()

    def corrupt(self, c: Any, row: int, col: int, rel: float) -> None:
        """Add ``rel`` times the row's largest magnitude to C[row, col] (tests only)."""
        c[row, col] += rel * float(c[row].abs().max())


class CupyGemm(NumpyGemm):
    """GEMM with cupy on the current CUDA device: fp64, fp32, fp16."""

    name = "cupy"
    dtypes = ("fp64", "fp32", "fp16")

    def __init__(self, cp: ModuleType, device: str) -> None:
        self.np = cp
        cp.cuda.Device(int(device.split(":")[1])).use()
        self.timer = Timer("cupy", cp)

    def unsupported(self, dtype: str) -> str | None:
        """Why ``dtype`` cannot run here, or None (cupy lacks bf16/fp8; tf32 is an import flag)."""
        return None if dtype in self.dtypes else f"{dtype} not measured with the cupy backend"

    def operands(self, dtype: str, m: int, n: int, k: int, seed: int) -> tuple[Any, Any]:
        """Random A (m x k) and B (k x n) in [-1, 1)."""
        cp = self.np
        rng = cp.random.default_rng(seed)
        dt = {"fp64": cp.float64, "fp32": cp.float32, "fp16": cp.float16}[dtype]
        gen = cp.float64 if dtype == "fp64" else cp.float32
        a = (rng.random((m, k), dtype=gen) * 2 - 1).astype(dt)
        b = (rng.random((k, n), dtype=gen) * 2 - 1).astype(dt)
        return a, b

    def digest(self, c: Any) -> str:
        """blake2b-128 hex digest of C's bytes (copied to the host)."""
        import hashlib

        return hashlib.blake2b(self.np.asnumpy(c).tobytes(), digest_size=16).hexdigest()


def gemm_backend(device: str, prefer: Sequence[str] = ("torch", "cupy")) -> Any:
    """First backend of ``prefer`` that imports, for ``device`` (``"cpu"`` or ``"cuda:N"``)."""
    reasons = []
    for name in prefer:
        mod, why = optional_import(name)
        if mod is None:
            reasons.append(why)
        elif name == "torch":
            return TorchGemm(mod, device)
        elif name == "numpy" and device == "cpu":
            return NumpyGemm(mod)
        elif name == "cupy" and device.startswith("cuda"):
            return CupyGemm(mod, device)
    raise ProbeSkip("; ".join(str(r) for r in reasons))


# --------------------------------------------------------------------------- NVML


def nvml_gpus() -> list[dict[str, Any]]:
    """GPUs as NVML sees them: ``[{"nvml_index", "gpu_name", "pci_bus_id", "numa_node"}]``.

    Empty when pynvml is missing or NVML cannot initialise (no driver).  NVML
    indices ignore CUDA_VISIBLE_DEVICES; join with CUDA devices on ``pci_bus_id``.
    """
    nvml, _ = optional_import("pynvml")
    if nvml is None:
        return []
    try:
        nvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no driver
        return []
    gpus = []
    try:
        for i in range(nvml.nvmlDeviceGetCount()):
            h = nvml.nvmlDeviceGetHandleByIndex(i)
            name = nvml.nvmlDeviceGetName(h)
            bus = nvml.nvmlDeviceGetPciInfo(h).busId
            name = name.decode() if isinstance(name, bytes) else name
            bus = (bus.decode() if isinstance(bus, bytes) else bus).lower()
            gpus.append({"nvml_index": i, "gpu_name": name, "pci_bus_id": bus,
                         "numa_node": pci_numa_node(bus)})
    finally:
        with contextlib.suppress(Exception):
            nvml.nvmlShutdown()
    return gpus
