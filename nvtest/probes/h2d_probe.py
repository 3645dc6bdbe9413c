"""Host<->device bandwidth probe: pinned H2D, D2H and bidirectional copies per GPU, GB/s.

Usage::

    python3 h2d_probe.py [--gpus 0,1] [--mib 256] [--reps 10] [--no-nvbandwidth]

If ``nvbandwidth`` is on PATH (and not disabled with ``--no-nvbandwidth`` or
``NVTEST_PROBE_DISABLE=nvbandwidth``) it is run with its copy-engine host
tests and the peer read (:data:`NVBANDWIDTH_TESTS`) and its stdout is returned
verbatim (``"raw_tool": "nvbandwidth"``, ``"raw"``, ``"results": []``) for the
controller's nvbandwidth parser, with its exit status (``raw_exit_code``) and its
stderr (``raw_stderr``): the tool prints its own failures (``[CUDA_ERROR_...]``) on
stdout, so the controller reads them, whatever the exit status.

Otherwise torch (else cupy) measures each GPU in turn, alone: the process is
bound to the CPUs local to the GPU (sysfs ``local_cpulist``) while the pinned
buffers are allocated and touched, so pages land on the GPU's NUMA node.
``--mib`` MiB per copy; GB/s = bytes / seconds / 1e9 per repetition (CUDA
events), best and median reported.  Bidirectional: one H2D and one D2H copy of
``--mib`` each on two streams at once, bytes counted in both directions.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import contextlib  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
from collections.abc import Callable, Iterator  # noqa: E402
from typing import Any  # noqa: E402

import _contract as contract  # noqa: E402
import _cuda_start as cs  # noqa: E402
import _devices as hw  # noqa: E402
import _libraries as libs  # noqa: E402
import _nvml as nvml  # noqa: E402
import _timing as timing  # noqa: E402

PROBE = "h2d"
NVBANDWIDTH_TESTS = (
    "host_to_device_memcpy_ce",
    "device_to_host_memcpy_ce",
    "host_to_device_bidirectional_memcpy_ce",
    "device_to_host_bidirectional_memcpy_ce",
    "device_to_device_memcpy_read_ce",
)
DIRECTIONS = ("h2d", "d2h", "bidir")


def direction_bytes(direction: str, nbytes: int) -> int:
    """Bytes moved by one repetition: ``nbytes`` one way, ``2 * nbytes`` bidirectional."""
    return 2 * nbytes if direction == "bidir" else nbytes


@contextlib.contextmanager
def bound_to(cpus: list[int] | None) -> Iterator[list[int] | None]:
    """Restrict this process to ``cpus`` for the block (no-op when None or not allowed)."""
    if not cpus or not hasattr(os, "sched_setaffinity"):
        yield None
        return
    old = os.sched_getaffinity(0)
    allowed = sorted(set(cpus) & old)
    if not allowed:
        yield None
        return
    os.sched_setaffinity(0, allowed)
    try:
        yield allowed
    finally:
        os.sched_setaffinity(0, old)


def _torch_copies(torch: Any, index: int, nbytes: int) -> dict[str, Callable[[], Any]]:
    """H2D, D2H and bidirectional copy callables on pinned host buffers of ``nbytes``."""
    dev = torch.device("cuda", index)
    host_in = torch.ones(nbytes, dtype=torch.uint8, pin_memory=True)
    host_out = torch.zeros(nbytes, dtype=torch.uint8, pin_memory=True)
    dev_in = torch.empty(nbytes, dtype=torch.uint8, device=dev)
    dev_out = torch.ones(nbytes, dtype=torch.uint8, device=dev)
    s1, s2 = torch.cuda.Stream(dev), torch.cuda.Stream(dev)

    def bidir() -> None:
        cur = torch.cuda.current_stream(dev)
        s1.wait_stream(cur)
        s2.wait_stream(cur)
        with torch.cuda.stream(s1):
            dev_in.copy_(host_in, non_blocking=True)
        with torch.cuda.stream(s2):
            host_out.copy_(dev_out, non_blocking=True)
        cur.wait_stream(s1)
        cur.wait_stream(s2)

    return {
        "h2d": lambda: dev_in.copy_(host_in, non_blocking=True),
        "d2h": lambda: host_out.copy_(dev_out, non_blocking=True),
        "bidir": bidir,
    }


def _cupy_copies(cp: Any, index: int, nbytes: int) -> dict[str, Callable[[], Any]]:
    """The same three copies with cupy pinned memory and cudaMemcpyAsync."""
    cp.cuda.Device(index).use()
    rt = cp.cuda.runtime
    host_in, host_out = cp.cuda.alloc_pinned_memory(nbytes), cp.cuda.alloc_pinned_memory(nbytes)
    dev_in, dev_out = cp.cuda.alloc(nbytes), cp.cuda.alloc(nbytes)
    rt.memset(dev_out.ptr, 1, nbytes)
    s1, s2 = cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)
    cur = cp.cuda.get_current_stream()

    def copy(dst: int, src: int, kind: int, stream: Any) -> None:
        rt.memcpyAsync(dst, src, nbytes, kind, stream.ptr)

    def bidir() -> None:
        for s in (s1, s2):
            s.wait_event(cur.record())
        copy(dev_in.ptr, host_in.ptr, rt.memcpyHostToDevice, s1)
        copy(host_out.ptr, dev_out.ptr, rt.memcpyDeviceToHost, s2)
        cur.wait_event(s1.record())
        cur.wait_event(s2.record())

    return {
        "h2d": lambda: copy(dev_in.ptr, host_in.ptr, rt.memcpyHostToDevice, cur),
        "d2h": lambda: copy(host_out.ptr, dev_out.ptr, rt.memcpyDeviceToHost, cur),
        "bidir": bidir,
    }


def measure_gpu(backend: str, mod: Any, index: int, nbytes: int, reps: int) -> list[dict[str, Any]]:
    """One entry per direction for GPU ``index`` (bound to its local CPUs meanwhile)."""
    ident = hw.gpu_identity(backend, mod, index)
    with bound_to(hw.pci_local_cpus(ident["pci_bus_id"])) as cpus:
        if backend == "torch":
            mod.cuda.set_device(index)
            copies = _torch_copies(mod, index, nbytes)
        else:
            copies = _cupy_copies(mod, index, nbytes)
        timer = timing.Timer(backend, mod)
        entries = []
        for direction, fn in copies.items():
            timer.repeat(fn, 2)
            st = timing.stats(timer.repeat(fn, reps))
            moved = direction_bytes(direction, nbytes)
            entries.append({
                "device": f"cuda:{index}",
                **ident,
                "host_cpus": cpus,
                "direction": direction,
                "bytes_per_iter": moved,
                "best_gbps": timing.gbps(moved, st["min"]),
                "median_gbps": timing.gbps(moved, st["median"]),
                "min_time_s": st["min"],
                "median_time_s": st["median"],
                "reps": reps,
                "pinned": True,
            })
    return entries


def run_nvbandwidth(path: str, doc: dict[str, Any], timeout_s: float) -> None:
    """Run nvbandwidth's :data:`NVBANDWIDTH_TESTS`; keep its stdout as ``raw``, its exit
    status as ``raw_exit_code`` and its stderr as ``raw_stderr``.

    The document is ``ok`` whenever the tool ran: its verdict (a failure it printed, a
    non-zero exit) is the controller's, from its own words (DESIGN: exit codes are not
    verdicts). A tool that does not answer within ``timeout_s`` is this probe's error.
    """
    cmd = [path]
    for test in NVBANDWIDTH_TESTS:
        cmd += ["-t", test]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        raise contract.ProbeError(f"nvbandwidth did not finish within {timeout_s:g} s: {' '.join(cmd)}") from exc
    sys.stderr.write(proc.stderr)
    doc.update(library="nvbandwidth", raw_tool="nvbandwidth", raw=proc.stdout,
               raw_exit_code=proc.returncode, raw_stderr=proc.stderr[-4000:], command=" ".join(cmd),
               implementation="nvbandwidth", gpus=nvml.nvml_gpus())
    doc["reason"] = None  # results stay empty: the controller parses "raw"
    doc["status"] = "ok"


def build_parser() -> contract.ProbeArgumentParser:
    parser = contract.ProbeArgumentParser(prog="h2d_probe.py", description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=contract.parse_index_list, default=None)
    parser.add_argument("--device", choices=("auto", "cuda"), default="auto",
                        help="cuda: no usable GPU is an error naming CUDA's words, not a skip")
    parser.add_argument("--mib", type=float, default=256.0, help="MiB per copy")
    parser.add_argument("--reps", type=int, default=10, help="timed repetitions per direction")
    parser.add_argument("--no-nvbandwidth", action="store_true", help="measure with torch/cupy")
    parser.add_argument("--timeout-s", type=float, default=900.0, help="nvbandwidth time limit")
    return parser


def body(args: Any, doc: dict[str, Any]) -> None:
    tool = None
    if not args.no_nvbandwidth and "nvbandwidth" not in libs.disabled():
        tool = shutil.which("nvbandwidth")
    if tool:
        run_nvbandwidth(tool, doc, args.timeout_s)
        return
    try:
        name, mod, count = hw.select_gpu_backend()
    except contract.ProbeSkip as exc:
        if args.device != "cuda":
            raise
        raise contract.ProbeError(cs.cuda_failure(exc), cs.CAUSE) from None  # asked for the GPUs: an error
    doc.update(library=libs.library_label(mod), implementation=f"{name}-pinned-copies")
    nbytes = int(args.mib * 2**20)
    for index in hw.gpu_indices(count, args.gpus):
        try:
            doc["results"].extend(measure_gpu(name, mod, index, nbytes, args.reps))
        except Exception as exc:  # noqa: BLE001 - CUDA errors become this GPU's entry
            doc["results"].append({"device": f"cuda:{index}", "status": "error",
                                   "reason": f"{type(exc).__name__}: {exc}"})


if __name__ == "__main__":
    sys.exit(contract.run(PROBE, build_parser(), body))
